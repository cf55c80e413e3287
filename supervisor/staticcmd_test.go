package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/google/go-cmp/cmp"
)

// stateChangers are commands that change a session's working directory or
// exported variables, each in a way the word list or the character rules of
// leavesStateAlone must catch. TestStateChangersChangeState proves with bash
// that each one does.
var stateChangers = []string{
	"cd sub",
	"ls; cd sub",
	"true && pushd sub",
	"export -n X",
	"X=changed",
	"ls && X=changed",
	"declare +x X",
	"typeset +x X",
	"readonly X; export -n X",
	"unset X",
	"set -a; read NEWVAR <input",
	"read X </dev/null || true; read X <input",
	"printf -v X changed",
	"let X++",
	"((X++))",
	"mapfile X <input; export -n X",
	"eval cd sub",
	"source ./script",
	". ./script",
	"command cd sub",
	"builtin cd sub",
	"c? sub",         // expands to the file named cd
	"ls; c[d] sub",   // the same, after an operator
	">out c? sub",    // a redirection before the command name
	"time -p c? sub", // a keyword's option before the command name
	"if true; then c? sub; fi",
	"! c? sub",
	"for X in changed; do true; done",
	"select X in a; do break; done <input",
	"getopts x X",
	"true | cd sub; shopt -s lastpipe; cd sub",
	"ls\ncd sub",
	"a[0]=1; export a; export -n X",
}

// staticCommands are commands leavesStateAlone passes.
var staticCommands = []string{
	"true",
	"ls -la",
	"ls *.go",
	"go test -run=X ./...",
	"make -j4 test 2>&1 | tail -n 20",
	"grep -rn needle . | head",
	"sleep 0 &",
	"ls cd export . eval",
	"ls sub && ls -d s*",
	"cat input > out2; cat out2",
	"(ls) ; ls",
	"ls # cd sub",
	"time -p ls",
	"if ls; then ls; else ls; fi",
	"",
}

func TestLeavesStateAlone(t *testing.T) {
	t.Parallel()
	for _, c := range stateChangers {
		if leavesStateAlone(c) {
			t.Errorf("leavesStateAlone(%q) = true; it changes the state", c)
		}
	}
	for _, c := range staticCommands {
		if !leavesStateAlone(c) {
			t.Errorf("leavesStateAlone(%q) = false", c)
		}
	}
	// Characters that hide or build words.
	for _, c := range []string{`"cd" sub`, `c''d sub`, `c\d sub`, "$CMD sub", "$(echo cd) sub", "`echo cd` sub",
		"{cd,sub}", "echo ${X:=changed}", "ls\x00", "ls é", "ls\r"} {
		if leavesStateAlone(c) {
			t.Errorf("leavesStateAlone(%q) = true", c)
		}
	}
}

// stateDir makes a directory with a subdirectory, an input file, a script
// that changes the state, and a file named cd (which c? matches).
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"input": "changed\n", "script": "cd sub\n", "cd": "", "x.go": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// bashState runs command in a real bash the way a tracked command runs
// (the start-up script, the EXIT trap on descriptor 3) in dir with X=orig
// exported, and returns the state it reported.
func bashState(t *testing.T, dir, command string) (string, []string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	state, err := os.CreateTemp(t.TempDir(), "state")
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	script, err := os.CreateTemp(t.TempDir(), "script")
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	if _, err := script.WriteString(stateScript); err != nil {
		t.Fatal(err)
	}
	if _, err := script.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, "-c", command)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "X=orig"}, stateEnv("", false)...)
	cmd.ExtraFiles = childFiles(state, script)
	_ = cmd.Run() // the exit code does not matter, the report does
	data, err := os.ReadFile(state.Name())
	if err != nil {
		t.Fatal(err)
	}
	cwd, env, err := parseState(data)
	if err != nil {
		t.Fatalf("%q: state: %v (%q)", command, err, data)
	}
	return cwd, slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "PWD" || k == "OLDPWD" || k == "SHLVL" || k == "_"
	})
}

// TestStateChangersChangeState proves the negative cases real: each command
// of stateChangers, run by bash, ends with another working directory or
// other exported variables than it started with. The positive cases keep
// both, in the same directory (which holds a file named cd).
func TestStateChangersChangeState(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	startCwd, startEnv := bashState(t, dir, "")
	for _, c := range stateChangers {
		cwd, env := bashState(t, dir, c)
		if cwd == startCwd && cmp.Equal(env, startEnv) {
			t.Errorf("%q left the state as it was (cwd %s, env %q): not a state changer", c, cwd, env)
		}
	}
	for _, c := range staticCommands {
		cwd, env := bashState(t, dir, c)
		if cwd != startCwd || !cmp.Equal(env, startEnv) {
			t.Errorf("%q changed the state: cwd %s env %q, started %s %q", c, cwd, env, startCwd, startEnv)
		}
	}
}

// TestStaticStateIsTheReport runs the same static command in two sessions
// started alike, one saving its start state (the fast path) and one made to
// report it through the trap, and requires the same saved state: the
// working directory through a symlink, and an environment with values bash
// quotes (newline, quotes, $, backslash, control and non-UTF-8 bytes, =,
// empty), a name bash does not import, and a variable given twice.
func TestStaticStateIsTheReport(t *testing.T) {
	dir := stateDir(t)
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
	if !leavesStateAlone("ls") {
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
// plainEnv) are scrubbed, so the outcome does not depend on the shell that
// ran `go test`: with BASH_ENV exported there, the static probe reported and
// the test failed ("set up to report: fd3…").
func TestStaticSkipsTheReport(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Scrub: reportingVars(os.Environ())})
	probe := `[[ -e /dev/fd/3 ]] && echo fd3; [[ -n $BASH_ENV$CORRAL_BASH_ENV ]] && echo bashenv; echo done`
	if leavesStateAlone(probe) {
		t.Fatal("the probe holds $: it must not be static")
	}
	res := run(t, s, Request{Session: "s", Command: probe})
	if !strings.Contains(res.Stdout, "fd3") {
		t.Errorf("a reporting command has no descriptor 3: %q", res.Stdout)
	}
	// A static command that shows whether its shell got descriptors 3 or 9
	// and the start-up script.
	static := "test -e /dev/fd/3 && echo fd3; test -e /dev/fd/9 && echo fd9; env"
	if !leavesStateAlone(static) {
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
// session report its state (plainEnv).
func reportingVars(env []string) []string {
	var names []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !plainEnv([]string{kv}) {
			names = append(names, name)
		}
	}
	return names
}
