package api_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sh/corral/api"
)

// wireDocPath is the prose contract, checked against the OpenAPI document.
const wireDocPath = "../docs/wire.md"

// wireTables reads docs/wire.md's object tables: under a heading that is
// a schema name in backticks ("### `Result`"), the first table's rows name
// the object's fields, each the one backticked word of its first cell, or
// take in another object's with "all of [Name](#anchor)". It returns the
// fields by object, includes resolved.
func wireTables(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(wireDocPath)
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile("^#+ `([A-Za-z]+)`$")
	field := regexp.MustCompile("^`([A-Za-z]+)`$")
	include := regexp.MustCompile(`^all of \[([A-Za-z]+)\]\(#[a-z0-9-]+\)$`)
	fields := map[string][]string{}
	includes := map[string][]string{}
	var cur string
	inTable := false
	for n, line := range strings.Split(string(b), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			if _, dup := fields[m[1]]; dup {
				t.Errorf("wire.md:%d: a second table of %s", n+1, m[1])
			}
			cur, inTable = m[1], false
			fields[cur] = nil
			continue
		}
		if strings.HasPrefix(line, "#") {
			cur = ""
			continue
		}
		if cur == "" {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				cur = "" // the object's table ended
			}
			continue
		}
		inTable = true
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		if cell == "field" || strings.HasPrefix(cell, "---") {
			continue
		}
		switch m, inc := field.FindStringSubmatch(cell), include.FindStringSubmatch(cell); {
		case m != nil:
			if slices.Contains(fields[cur], m[1]) {
				t.Errorf("wire.md:%d: %s.%s named twice", n+1, cur, m[1])
			}
			fields[cur] = append(fields[cur], m[1])
		case inc != nil:
			includes[cur] = append(includes[cur], inc[1])
		default:
			t.Errorf("wire.md:%d: a row of %s that names no field: %q", n+1, cur, cell)
		}
	}
	for name, incs := range includes {
		for _, inc := range incs {
			if _, ok := fields[inc]; !ok {
				t.Errorf("wire.md: %s takes in %s, which has no table", name, inc)
			}
			fields[name] = append(fields[name], fields[inc]...)
		}
	}
	return fields
}

// TestWireDoc: every object of the OpenAPI document has a table in
// docs/wire.md naming exactly its fields; wire.md has no table of an
// object the document lacks; every key of every golden file is named in a
// table.
func TestWireDoc(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	tables := wireTables(t)
	named := map[string]bool{}
	for name, s := range doc.Components.Schemas {
		if len(s.Properties) == 0 {
			continue // a union of other objects (ExecLine, EventsLine)
		}
		got, ok := tables[name]
		if !ok {
			t.Errorf("docs/wire.md has no table of %s (a heading \"### `%s`\" and a table of its fields)", name, name)
			continue
		}
		want := slices.Sorted(maps.Keys(s.Properties))
		for _, f := range want {
			if !slices.Contains(got, f) {
				t.Errorf("docs/wire.md: %s.%s is in the schema but not in its table", name, f)
			}
		}
		for _, f := range got {
			named[f] = true
			if _, ok := s.Properties[f]; !ok {
				t.Errorf("docs/wire.md: %s.%s is in its table but not in the schema", name, f)
			}
		}
	}
	for name := range tables {
		if s, ok := doc.Components.Schemas[name]; !ok || len(s.Properties) == 0 {
			t.Errorf("docs/wire.md has a table of %s, which is no object of the document", name)
		}
	}

	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, k := range jsonKeys(v) {
			if !named[k] {
				t.Errorf("%s: the key %q is named in no table of docs/wire.md", f, k)
			}
		}
	}
}

// jsonKeys returns every object key in v, at any depth.
func jsonKeys(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			out = append(out, k)
			out = append(out, jsonKeys(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, jsonKeys(x)...)
		}
	}
	return out
}
