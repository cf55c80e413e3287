package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnsetBashEnvStaysUnset checks that a tracked command whose request
// unsets BASH_ENV, or whose supervisor scrubs it, neither sources the
// inherited script nor sees the variable: the start-up script hands the
// command its own BASH_ENV back, and must not hand back one the request or
// the configuration took away.
func TestUnsetBashEnvStaysUnset(t *testing.T) {
	script := filepath.Join(t.TempDir(), "env.sh")
	if err := os.WriteFile(script, []byte("echo sourced\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BASH_ENV", script)
	const probe = `echo "[$BASH_ENV]"`
	for _, tt := range []struct {
		name string
		cfg  Config
		req  Request
	}{
		{"request unsets", Config{}, Request{Session: "s", Command: probe, Unset: []string{"BASH_ENV"}}}, // per request
		{"server scrubs", Config{Scrub: []string{"BASH_ENV"}}, Request{Session: "s", Command: probe}},    // per server
	} {
		res := run(t, newSup(t, tt.cfg), tt.req)
		if strings.Contains(res.Stdout, "sourced") || !strings.Contains(res.Stdout, "[]") {
			t.Errorf("%s: the inherited BASH_ENV came back: %q", tt.name, res.Stdout)
		}
	}
}
