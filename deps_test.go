package corral

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/corral-sh/corral/"

// layers is the import table of the packages: for each
// package (a "/..." key covers a subtree), the corral packages and the
// modules it may import beyond the standard library. Nothing imports
// upward; a package missing here fails the test until it is placed.
var layers = map[string][]string{
	"internal/lines":    nil,
	"internal/utf8cut":  nil,
	"internal/loopback": nil,
	"internal/heapsize": nil,
	"internal/confine":  nil,
	// The bash state protocol: pure, no process started.
	"internal/shellstate": nil,
	"capture":             {"internal/lines"},
	"ringtail":            {"internal/lines", "internal/heapsize", "github.com/smallnest/ringbuffer"},
	"budget":              {"internal/lines", "internal/utf8cut"},
	"spill":               {"golang.org/x/sys"},
	// killtree's readers of /proc and small kernel files: a leaf.
	"killtree/internal/procfs": {"golang.org/x/sys"},
	"killtree":                 {"killtree/internal/procfs", "golang.org/x/sys"},
	"journal":                  {"spill", "go.etcd.io/bbolt"},
	// creack/pty: the terminals of tty commands (docs/terminals.md).
	"supervisor": {"capture", "ringtail", "budget", "spill", "killtree", "journal", "internal/lines",
		"internal/utf8cut", "internal/shellstate", "internal/heapsize", "github.com/rs/zerolog", "golang.org/x/sys",
		"github.com/creack/pty"},
	// The terminal emulator that renders their screens, given to a
	// Supervisor (Config.Emulator) by those that run terminals: a leaf,
	// so that corral run does not load it.
	"supervisor/vtemu": {"github.com/charmbracelet/x/vt"},
	"api": {"supervisor", "spill", "budget", "journal", "api/...", "internal/loopback", "github.com/rs/zerolog",
		"github.com/modelcontextprotocol/go-sdk", "github.com/google/jsonschema-go",
		"github.com/prometheus/client_golang"},
	// The envd Connect service and its generated code.
	"api/envd/...": {"supervisor", "spill", "budget", "journal", "api/envd/...", "internal/loopback", "internal/confine",
		"connectrpc.com/connect", "google.golang.org/protobuf"},
	// agent-sandbox's sandboxd process service (gRPC) and files API, and
	// its generated code.
	"api/sandboxd/...": {"supervisor", "api/sandboxd/...", "internal/loopback", "internal/confine",
		"google.golang.org/grpc", "google.golang.org/protobuf"},
	// What corral and corral-server share: small, corral run loads it.
	"cmd/internal/cli": {"killtree", "supervisor"},
	// corral run itself, which both run: budget, spill and journal for the
	// errors it names, killtree for its Config and Tier.
	"cmd/internal/runcmd": {"cmd/internal/cli", "supervisor", "budget", "killtree", "journal", "spill", "golang.org/x/sys"},
	// corral links no face and no terminal emulator (docs/startup.md).
	"cmd/corral": {"cmd/internal/cli", "cmd/internal/runcmd", "golang.org/x/sys"},
	// The servers and doctor: budget and killtree are the types of
	// supervisor's public API (Policy, Info, killtree.Config and Tier) and
	// killtree.Doctor.
	"cmd/corral-server": {"cmd/internal/cli", "cmd/internal/runcmd", "api", "api/...", "supervisor", "supervisor/vtemu", "budget", "killtree", "journal", "spill",
		"github.com/rs/zerolog", "golang.org/x/sys", "google.golang.org/grpc"},
	"internal/proctest": {"golang.org/x/sys"},
	"integration/...":   {"*"}, // end-to-end tests and their kit use everything
}

// TestLayering fails when a package imports outside its row of layers.
func TestLayering(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if pkg == strings.TrimSuffix(module, "/") {
			continue // this package: the repository's own tests
		}
		allowed, ok := row(pkg)
		if !ok {
			t.Errorf("%s is not in the layering table (deps_test.go): place it", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !permitted(imp, allowed) {
				t.Errorf("%s imports %s, outside its layer %v", pkg, imp, allowed)
			}
		}
	}
}

// row returns the table row for pkg: its own, else the nearest "/..." one.
func row(pkg string) ([]string, bool) {
	if r, ok := layers[pkg]; ok {
		return r, true
	}
	for p := pkg; ; {
		i := strings.LastIndexByte(p, '/')
		if r, ok := layers[p+"/..."]; ok {
			return r, true
		}
		if i < 0 {
			return nil, false
		}
		p = p[:i]
	}
}

// permitted reports whether imp may be imported under the row allowed: the
// standard library always, else a corral package or a module it lists.
func permitted(imp string, allowed []string) bool {
	first, _, _ := strings.Cut(imp, "/")
	if !strings.Contains(first, ".") {
		return true // the standard library
	}
	name, corral := strings.CutPrefix(imp, module)
	if !corral {
		name = imp
	}
	for _, a := range allowed {
		switch {
		case a == "*", a == name:
			return true
		case strings.HasSuffix(a, "/..."):
			if base := strings.TrimSuffix(a, "/..."); name == base || strings.HasPrefix(name, base+"/") {
				return true
			}
		case !corral && strings.HasPrefix(name, a+"/"):
			return true // a package of an allowed module
		}
	}
	return false
}

// TestPermitted pins the table's matching rules.
func TestPermitted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pkg, imp string
		want     bool
	}{
		{"budget", "strings", true},                                              // the standard library
		{"budget", module + "internal/utf8cut", true},                            // listed
		{"budget", module + "supervisor", false},                                 // upward
		{"budget", "golang.org/x/sys/unix", false},                               // a module not listed
		{"ringtail", "github.com/smallnest/ringbuffer", true},                    // a listed module itself
		{"api", "github.com/prometheus/client_golang/prometheus/promhttp", true}, // a package of a listed module
		{"api", module + "api/envd", true},                                       // a listed subtree
		{"api/envd/processpb", module + "api", false},                            // a subtree row, upward
		{"integration/internal/benchkit", module + "killtree", true},             // integration uses everything
	}
	for _, tc := range tests {
		r, ok := row(tc.pkg)
		if !ok {
			t.Fatalf("no row for %s", tc.pkg)
		}
		if got := permitted(tc.imp, r); got != tc.want {
			t.Errorf("%s importing %s: permitted %v, want %v", tc.pkg, tc.imp, got, tc.want)
		}
	}
	if _, ok := row("newpkg"); ok {
		t.Error("a package missing from the table has a row")
	}
}
