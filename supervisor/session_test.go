package supervisor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// envLines runs `pwd; env -0` style listing of the named variables in
// session sess and returns the working directory and the values (missing
// ones as "<unset>").
func sessionView(t *testing.T, s *Supervisor, sess string, names ...string) (string, []string) {
	t.Helper()
	cmd := "pwd"
	for _, n := range names {
		cmd += "; printf '%s\\n--\\n' \"${" + n + "-<unset>}\""
	}
	res := run(t, s, Request{Command: cmd, Session: sess})
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("view: %+v", res)
	}
	dir, vals, _ := strings.Cut(res.Stdout, "\n")
	return dir, strings.Split(strings.TrimSuffix(vals, "\n--\n"), "\n--\n")
}

func TestSessionCarriesCwdAndExports(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	dir := t.TempDir()
	work := filepath.Join(dir, "x y")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	work, _ = filepath.EvalSymlinks(work)

	res := run(t, s, Request{Session: "s1", Command: "cd '" + work + "' && export A=1 B='two words' " +
		`C=$'line\nbreak' D=$'q"$` + "`" + `\\\x01\xff' PAGER=less`})
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Cwd != work {
		t.Fatalf("first command: exit %v cwd %q, want 0 %q (stderr %q)", res.ExitCode, res.Cwd, work, res.Stderr)
	}
	gotDir, vals := sessionView(t, s, "s1", "A", "B", "C", "PAGER")
	want := []string{"1", "two words", "line\nbreak", "less"}
	if gotDir != work || !cmp.Equal(vals, want) {
		t.Errorf("second command saw cwd %q vars %q, want %q %q", gotDir, vals, work, want)
	}

	// A value with quotes, control and non-UTF-8 bytes comes back exactly.
	res = run(t, s, Request{Session: "s1", Command: `[[ $D == $'q"$` + "`" + `\\\x01\xff' ]] && echo D-exact`})
	if res.Stdout != "D-exact\n" {
		t.Errorf("D was not carried exactly: %q", res.Stdout)
	}
	// unset is carried too; the request's own env applies on top.
	run(t, s, Request{Session: "s1", Command: "unset A"})
	res = run(t, s, Request{Session: "s1", Command: `printf '%s|%s' "${A-<unset>}" "$B"`, Env: map[string]string{"B": "over"}})
	if res.Stdout != "<unset>|over" {
		t.Errorf("after unset with env override: %q", res.Stdout)
	}
	// The override was for that command only... but it exited by itself, so
	// its environment is the session's now, like a variable it exported.
	// resetSession clears everything.
	res = run(t, s, Request{Session: "s1", ResetSession: true, Command: `pwd; printf '%s' "${B-<unset>}"`})
	wd, _ := os.Getwd()
	if res.Stdout != wd+"\n<unset>" {
		t.Errorf("after reset: %q, want the start directory and no B", res.Stdout)
	}

	// Another session and the stateless default see nothing of it.
	for _, other := range []string{"s2", "", StatelessSession} {
		_, vals := sessionView(t, s, other, "A", "B")
		if !cmp.Equal(vals, []string{"<unset>", "<unset>"}) {
			t.Errorf("session %q sees %q", other, vals)
		}
	}
	if res := run(t, s, Request{Command: "cd /; export Z=1"}); res.Cwd != "" {
		t.Errorf("a stateless command reports cwd %q", res.Cwd)
	}
	if _, ok := s.Sessions().Get(StatelessSession); ok {
		t.Error("the default session keeps state")
	}
}

func TestSessionStateNotSpoofed(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	base := t.TempDir()
	base, _ = filepath.EvalSymlinks(base)
	run(t, s, Request{Session: "s", Command: "cd " + base + " && export KEEP=kept"})
	tests := []struct {
		name string
		cmd  string
		code int
	}{
		// A fake state block on stdout changes nothing.
		{"stdout-block", `printf '\0corral-state 1\0/\n\0declare -x KEEP="spoofed"\n\0corral-end\0'; exit 3`, 3},
		// Descriptor 3 closed: nothing is saved and the exit code stays.
		{"fd3-closed", "exec 3>&-; cd /; export KEEP=no; exit 4", 4},
		// Descriptor 3 sent to /dev/null.
		{"fd3-devnull", "exec 3>/dev/null; cd /; export KEEP=no; exit 5", 5},
		// Descriptor 3 made a copy of stdout: the state must not reach the output.
		{"fd3-stdout", "exec 3>&1; cd /; export KEEP=no SECRET_X=hunter2; exit 6", 6},
		// Killed by a signal: the shell did not exit by itself.
		{"kill9", "cd /; export KEEP=no; kill -9 $$", -1},
		// The command's own EXIT trap replaces corral's: nothing is saved.
		{"own-trap", "trap 'echo bye' EXIT; cd /; export KEEP=no", 0},
		// set -e cannot turn the trap's failed write into another exit code.
		{"set-e", "set -e; exec 3>&-; cd /; export KEEP=no; true", 0},
		// Descriptor 3 sent to a file of the command's: the state must not
		// land in it (checked below).
		{"fd3-file", "exec 3>>" + base + "/fd3-file; cd /; export KEEP=no SECRET_X=hunter2; exit 7", 7},
		// Descriptor 3 sent into a process substitution that copies it to
		// stdout: a pipe, but not corral's.
		{"fd3-procsub", "exec 3> >(cat); cd /; export KEEP=no SECRET_X=hunter2; exit 8", 8},
		// The witness (descriptor 9) closed or moved: nothing is saved.
		{"fd9-closed", "exec 9>&-; cd /; export KEEP=no; exit 9", 9},
		// Descriptor 3 filled without end: the command is not held up and
		// nothing is saved.
		{"fd3-flood", "head -c 50000000 /dev/zero >&3; cd /; export KEEP=no; echo flooded", 0},
	}
	for _, tc := range tests {
		res := run(t, s, Request{Session: "s", Command: tc.cmd})
		switch {
		case tc.code >= 0 && (res.ExitCode == nil || *res.ExitCode != tc.code):
			t.Errorf("%s: exit %v, want %d", tc.name, res.ExitCode, tc.code)
		case tc.code < 0 && res.ExitCode != nil:
			t.Errorf("%s: exit %v, want a signal", tc.name, *res.ExitCode)
		}
		if strings.Contains(res.Stdout, "SECRET_X") || strings.Contains(res.Stdout, "declare -x") &&
			tc.name != "stdout-block" {
			t.Errorf("%s: the state reached stdout: %q", tc.name, res.Stdout)
		}
		dir, vals := sessionView(t, s, "s", "KEEP")
		if dir != base || vals[0] != "kept" {
			t.Errorf("%s: state became cwd %q KEEP %q, want %q kept", tc.name, dir, vals[0], base)
		}
	}
	if b, err := os.ReadFile(filepath.Join(base, "fd3-file")); err != nil || len(b) != 0 {
		t.Errorf("the command's own descriptor 3 file holds %q (%v), want it empty", b, err)
	}
}

// TestSessionUserBashEnv: a command's own BASH_ENV is sourced once, is what
// the command and its nested shells see, and corral's hand-over variable is
// never visible.
func TestSessionUserBashEnv(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	rc := filepath.Join(t.TempDir(), "rc")
	if err := os.WriteFile(rc, []byte("echo sourced-rc\nexport FROM_RC=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := `printf 'BASH_ENV=%s FROM_RC=%s CORRAL_BASH_ENV=%s\n' "${BASH_ENV-<unset>}" "${FROM_RC-<unset>}" "${CORRAL_BASH_ENV-<unset>}"; ` +
		`env | grep -c '^CORRAL_BASH_ENV=' ; bash -c 'echo nested'`
	res := run(t, s, Request{Session: "rc", Command: cmd, Env: map[string]string{"BASH_ENV": rc}})
	want := "sourced-rc\nBASH_ENV=" + rc + " FROM_RC=1 CORRAL_BASH_ENV=<unset>\n0\nsourced-rc\nnested\n"
	if res.Stdout != want {
		t.Errorf("with a BASH_ENV of its own, stdout %q, want %q", res.Stdout, want)
	}
	res = run(t, s, Request{Session: "norc", Command: cmd})
	want = "BASH_ENV=<unset> FROM_RC=<unset> CORRAL_BASH_ENV=<unset>\n0\nnested\n"
	if res.Stdout != want {
		t.Errorf("without a BASH_ENV, stdout %q, want %q", res.Stdout, want)
	}
}

func TestSessionExitCodesAndTimeouts(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	dir, _ := filepath.EvalSymlinks(t.TempDir())

	// exit 7 is the shell exiting by itself: saved.
	res := run(t, s, Request{Session: "e", Command: "cd " + dir + "; export V=7; exit 7"})
	if res.ExitCode == nil || *res.ExitCode != 7 || res.Cwd != dir {
		t.Fatalf("exit 7: %v cwd %q", res.ExitCode, res.Cwd)
	}
	// A timeout leaves the state as it was, and Result.cwd says where the
	// next command starts.
	res = run(t, s, Request{Session: "e", Timeout: time.Second, Command: "cd /; export V=timeout; sleep 30"})
	if !res.TimedOut || res.Cwd != dir {
		t.Fatalf("timeout: timedOut %v cwd %q", res.TimedOut, res.Cwd)
	}
	// An abort too.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	res, err := s.Run(ctx, marked(t, Request{Session: "e", Command: "cd /; export V=aborted; sleep 30"}))
	if err != nil || !res.Aborted {
		t.Fatalf("abort: %v %+v", err, res)
	}
	gotDir, vals := sessionView(t, s, "e", "V")
	if gotDir != dir || vals[0] != "7" {
		t.Errorf("after timeout and abort: cwd %q V %q, want %q 7", gotDir, vals[0], dir)
	}
}

func TestSessionVanishedCwd(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	start, _ := filepath.EvalSymlinks(t.TempDir())
	gone := filepath.Join(start, "gone")
	run(t, s, Request{Session: "v", Dir: start, Command: "mkdir gone && cd gone"})
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	res := run(t, s, Request{Session: "v", Command: "pwd"})
	if res.Stdout != start+"\n" {
		t.Errorf("ran in %q, want the session's start directory %q", res.Stdout, start)
	}
	if want := "the session's working directory " + gone + " no longer exists; the command ran in " + start; !strings.Contains(res.Stderr, want) {
		t.Errorf("stderr %q lacks %q", res.Stderr, want)
	}
}

func TestSessionStateTooLarge(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	run(t, s, Request{Session: "big", Command: "export SMALL=1"})
	res := run(t, s, Request{Session: "big", Command: "export HUGE=$(head -c 300000 /dev/zero | tr '\\0' x); export SMALL=2"})
	if !strings.Contains(res.Stderr, "is over the 256 KiB limit and was not saved") {
		t.Errorf("stderr %q lacks the too-large note", res.Stderr)
	}
	_, vals := sessionView(t, s, "big", "SMALL", "HUGE")
	if vals[0] != "1" || vals[1] != "<unset>" {
		t.Errorf("after an oversized state: SMALL %q HUGE len %d", vals[0], len(vals[1]))
	}
}

func TestSessionConcurrentLaterFinisherWins(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	run(t, s, Request{Session: "c", Command: "export W=start"})
	dir := t.TempDir()
	gate, up := filepath.Join(dir, "gate"), filepath.Join(dir, "up")
	var wg sync.WaitGroup
	seen := make([]string, 2)
	for i, cmd := range []string{
		// Both start before either ends (the fast one waits for the slow
		// one to be up), and the slow one waits until the fast one's Run
		// has returned (its state saved), so it finishes last. A gate the
		// fast command touched itself raced its own save.
		`echo "$W"; touch ` + up + `; while [ ! -e ` + gate + ` ]; do sleep 0.02; done; export W=slow`,
		`echo "$W"; while [ ! -e ` + up + ` ]; do sleep 0.02; done; export W=fast`,
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen[i] = strings.TrimSpace(run(t, s, Request{Session: "c", Command: cmd}).Stdout)
			if i == 1 {
				os.WriteFile(gate, nil, 0o600)
			}
		}()
	}
	wg.Wait()
	if seen[0] != "start" || seen[1] != "start" {
		t.Errorf("concurrent commands started from %q, want both from start", seen)
	}
	if _, vals := sessionView(t, s, "c", "W"); vals[0] != "slow" {
		t.Errorf("W = %q, want the later finisher's (slow)", vals[0])
	}
}

func TestSessionEnvNeverOnDiskOrInLogs(t *testing.T) {
	t.Parallel()
	var logBuf bytes.Buffer
	var mu sync.Mutex
	logger := zerolog.New(zerolog.SyncWriter(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logBuf.Write(p)
	}))).Level(zerolog.DebugLevel)
	data := t.TempDir()
	s := newSup(t, Config{DataDir: data, Logger: &logger})
	const secret = "s3cr3t-value-7f1c9"
	run(t, s, Request{Session: "sec", Command: "export TOKEN=" + secret + "; seq 1 100000"})
	res := run(t, s, Request{Session: "sec", Command: `echo "$TOKEN"; seq 1 100000`})
	if !strings.HasPrefix(res.Stdout, secret+"\n") {
		t.Fatalf("the variable was not carried: %q", res.Stdout[:min(len(res.Stdout), 40)])
	}
	// The second command spilled its stdout (which holds the value, as the
	// command printed it); the first spill and everything else must not.
	err := filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == res.StdoutInfo.SpillPath {
			return err
		}
		b, err := os.ReadFile(p)
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the session's secret", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if bytes.Contains(logBuf.Bytes(), []byte(secret)) {
		t.Error("the log holds the session's secret")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestSessionSyntaxErrorReadsAsWithout(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	for _, cmd := range []string{"foo(", "echo $LINENO\necho $LINENO; nosuchcommand-xyz"} {
		plain := run(t, s, Request{Command: cmd})
		tracked := run(t, s, Request{Session: "syn", Command: cmd})
		if plain.Stdout != tracked.Stdout || plain.Stderr != tracked.Stderr || *plain.ExitCode != *tracked.ExitCode {
			t.Errorf("%q: stateless %q %q %d, tracked %q %q %d", cmd, plain.Stdout, plain.Stderr, *plain.ExitCode,
				tracked.Stdout, tracked.Stderr, *tracked.ExitCode)
		}
	}
}

func TestNoSessionStateConfig(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{NoSessionState: true})
	run(t, s, Request{Session: "cli", Command: "export A=1; cd /"})
	res := run(t, s, Request{Session: "cli", Command: `printf '%s' "${A-<unset>}"`})
	if res.Stdout != "<unset>" || res.Cwd != "" {
		t.Errorf("NoSessionState carried state: %q cwd %q", res.Stdout, res.Cwd)
	}
}

// TestSessionExportedArrays: `export -p` lists exported arrays, which never
// reach a child's environment. They are skipped, and the rest of the
// state is saved (it was lost whole before: the listing did not parse).
func TestSessionExportedArrays(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	res := run(t, s, Request{Session: "a", Command: `declare -ax arr=(1 "a b" $'c\nd'); declare -Ax m=([k]=v ["a b"]=$'c\n' ['x]y']="q"); export AFTER=1`})
	if res.ExitCode == nil || *res.ExitCode != 0 || strings.Contains(res.Stderr, "corral") {
		t.Fatalf("first command: %+v", res)
	}
	_, vals := sessionView(t, s, "a", "AFTER")
	if !cmp.Equal(vals, []string{"1"}) {
		t.Errorf("AFTER = %q, want 1: the state after exported arrays was not saved", vals)
	}
}

// TestSessionForgedStateReport: a command that writes the report's two
// markers to descriptor 3 itself, overlapping on their shared NUL, and
// closes it so that the trap writes nothing, gets its Result, and the
// session keeps the state it had (the parser once panicked on these bytes).
func TestSessionForgedStateReport(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	dir := t.TempDir()
	run(t, s, Request{Session: "forged", Command: "cd " + dir})
	res := run(t, s, Request{Session: "forged", Command: `printf '\0corral-state 1\0corral-end\0' >&3; exec 3>&-; cd /`})
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("forged report: %+v", res)
	}
	if info, ok := s.Sessions().Get("forged"); !ok || info.Cwd != dir {
		t.Errorf("after a forged report the session is %+v (%v), want its cwd %s kept", info, ok, dir)
	}
}
