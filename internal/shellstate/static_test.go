package shellstate

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stateChangers are commands that change a session's working directory or
// exported variables, each in a way the word list or the character rules of
// LeavesAlone must catch. TestStateChangersChangeState proves with bash
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

// staticCommands are commands LeavesAlone passes.
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
		if LeavesAlone(c) {
			t.Errorf("LeavesAlone(%q) = true; it changes the state", c)
		}
	}
	for _, c := range staticCommands {
		if !LeavesAlone(c) {
			t.Errorf("LeavesAlone(%q) = false", c)
		}
	}
	// Characters that hide or build words.
	for _, c := range []string{`"cd" sub`, `c''d sub`, `c\d sub`, "$CMD sub", "$(echo cd) sub", "`echo cd` sub",
		"{cd,sub}", "echo ${X:=changed}", "ls\x00", "ls é", "ls\r"} {
		if LeavesAlone(c) {
			t.Errorf("LeavesAlone(%q) = true", c)
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
	if _, err := script.WriteString(Script(true, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := script.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, "-c", command)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "X=orig"}, Env("", false)...)
	cmd.ExtraFiles = Files(state, script)
	_ = cmd.Run() // the exit code does not matter, the report does
	data, err := os.ReadFile(state.Name())
	if err != nil {
		t.Fatal(err)
	}
	cwd, env, err := Parse(data)
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
