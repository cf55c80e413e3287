package api_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMCPDocTools: docs/mcp.md's Tools table names exactly the tools the
// corral profile serves, and for each exactly the arguments of its input
// schema (the backticked words of the second column before any
// parenthesis).
func TestMCPDocTools(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Tools\n")
	if !ok {
		t.Fatal("docs/mcp.md has no Tools section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	word := regexp.MustCompile("`([A-Za-z_]+)`")
	paren := regexp.MustCompile(`\([^)]*\)`)
	doc := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		name := word.FindStringSubmatch(cells[1])
		if name == nil {
			continue // the header and its rule
		}
		var args []string
		for _, m := range word.FindAllStringSubmatch(paren.ReplaceAllString(cells[2], ""), -1) {
			args = append(args, m[1])
		}
		slices.Sort(args)
		doc[name[1]] = args
	}
	e := newEnv(t)
	tools, err := inMemoryMCP(t, e).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, tool := range tools.Tools {
		served[tool.Name] = true
		raw, _ := json.Marshal(tool.InputSchema)
		var sch struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		json.Unmarshal(raw, &sch)
		want := slices.Sorted(maps.Keys(sch.Properties))
		got, ok := doc[tool.Name]
		switch {
		case !ok:
			t.Errorf("docs/mcp.md does not list the tool %s", tool.Name)
		case !slices.Equal(got, want):
			t.Errorf("docs/mcp.md: %s takes %v, the schema %v", tool.Name, got, want)
		}
	}
	for name := range doc {
		if !served[name] {
			t.Errorf("docs/mcp.md lists %s, which is not served", name)
		}
	}
}
