package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/internal/shellstate"
	"github.com/google/go-cmp/cmp"
)

// TestStaticStateIsTheReport runs the same static command in two sessions
// started alike, one saving its start state (the fast path) and one made to
// report it through the trap, and requires the same saved state: the
// working directory through a symlink, and an environment with values bash
// quotes (newline, quotes, $, backslash, control and non-UTF-8 bytes, =,
// empty), a name bash does not import, and a variable given twice.
func TestStaticStateIsTheReport(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"Q_NL": "a\nb", "Q_QUOTES": `'"` + "`", "Q_DOLLAR": "$HOME ${X}", "Q_BS": `a\b\\`,
		"Q_CTRL": "\x01\x1b[0m", "Q_BYTES": "\xff\xfe", "Q_EQ": "a=b=c", "Q_EMPTY": "", "Q_UNI": "é ✓",
	}
	s := newSup(t, Config{})
	saved := func(sess string, report bool) (string, []string) {
		testHookAlwaysReport = report
		defer func() { testHookAlwaysReport = false }()
		res := run(t, s, Request{Session: sess, Command: "ls", Dir: link, Env: env})
		if res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("ls in %s: %+v", sess, res)
		}
		s.sessions.mu.Lock()
		defer s.sessions.mu.Unlock()
		sess2 := s.sessions.m[sess]
		got := slices.DeleteFunc(slices.Clone(sess2.env), func(kv string) bool {
			return strings.HasPrefix(kv, proctest.MarkerEnv+"=") // each command's own
		})
		slices.Sort(got)
		return sess2.cwd, got
	}
	if !shellstate.LeavesAlone("ls") {
		t.Fatal("ls is not static")
	}
	fastCwd, fastEnv := saved("fast", false)
	slowCwd, slowEnv := saved("reported", true)
	if fastCwd != dir || slowCwd != dir {
		t.Errorf("saved cwd: static %q, reported %q, want %q", fastCwd, slowCwd, dir)
	}
	if diff := cmp.Diff(slowEnv, fastEnv); diff != "" {
		t.Errorf("saved environment, reported (-) against static (+):\n%s", diff)
	}
	for k, v := range env {
		if k != proctest.MarkerEnv && !slices.Contains(fastEnv, k+"="+v) {
			t.Errorf("%s not saved as %q", k, v)
		}
	}
}

// TestStaticSkipsTheReport checks that a static command's shell is not
// asked to report (no BASH_ENV, no descriptor 3), that one with a state
// word is, and that an exported function in the environment makes even
// `true` report. Variables of the test's own environment that make every
// command report by design (BASH_ENV, SHELLOPTS, an exported function: see
// shellstate.PlainEnv) are scrubbed, so the outcome does not depend on the shell that
// ran `go test`: with BASH_ENV exported there, the static probe reported and
// the test failed ("set up to report: fd3…").
func TestStaticSkipsTheReport(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Scrub: reportingVars(os.Environ())})
	probe := `[[ -e /dev/fd/3 ]] && echo fd3; [[ -n $BASH_ENV$CORRAL_BASH_ENV ]] && echo bashenv; echo done`
	if shellstate.LeavesAlone(probe) {
		t.Fatal("the probe holds $: it must not be static")
	}
	res := run(t, s, Request{Session: "s", Command: probe})
	if !strings.Contains(res.Stdout, "fd3") {
		t.Errorf("a reporting command has no descriptor 3: %q", res.Stdout)
	}
	// A static command that shows whether its shell got descriptors 3 or 9
	// and the start-up script.
	static := "test -e /dev/fd/3 && echo fd3; test -e /dev/fd/9 && echo fd9; env"
	if !shellstate.LeavesAlone(static) {
		t.Fatal("the static probe is not static")
	}
	res = run(t, s, Request{Session: "s", Command: static})
	if strings.Contains(res.Stdout, "fd3") || strings.Contains(res.Stdout, "fd9") || strings.Contains(res.Stdout, "BASH_ENV=") {
		t.Errorf("a static command's shell was set up to report: %q", res.Stdout)
	}
	// An exported function could do anything: the report is asked for.
	res = run(t, s, Request{Session: "s", Command: static, Env: map[string]string{"BASH_FUNC_f%%": "() { cd /; }"}})
	if !strings.Contains(res.Stdout, "fd3") {
		t.Errorf("with an exported function in the environment the shell was not set up to report: %q", res.Stdout)
	}
}

// reportingVars names the variables of env that make every command of a
// session report its state (shellstate.PlainEnv).
func reportingVars(env []string) []string {
	var names []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !shellstate.PlainEnv([]string{kv}) {
			names = append(names, name)
		}
	}
	return names
}
