package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/shellstate"
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

// TestTooBigVariableIsNotSaved exports a variable execve would refuse
// alone (over MAX_ARG_STRLEN): the state is not saved, the command's
// stderr says so, and every later command of the session still starts,
// `unset BIG` among them. One under the limit is saved.
func TestTooBigVariableIsNotSaved(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	res := run(t, s, Request{Session: "big", Command: `export BIG=$(head -c 200000 /dev/zero | tr '\0' a); cd /`})
	if !strings.Contains(res.Stderr, "BIG is 200004 bytes") || !strings.Contains(res.Stderr, "not saved") {
		t.Errorf("no note on the unsaved state: %q", res.Stderr)
	}
	for _, cmd := range []string{`echo "${#BIG} $PWD"`, `unset BIG; echo "${#BIG}"`} {
		res := run(t, s, Request{Session: "big", Command: cmd})
		if res.ExitCode == nil || *res.ExitCode != 0 || strings.HasPrefix(res.Stdout, "200000") || strings.HasPrefix(res.Stdout, "0 /\n") {
			t.Errorf("%s after the big export: %+v", cmd, res)
		}
	}
	run(t, s, Request{Session: "fits", Command: `export FITS=$(head -c 100000 /dev/zero | tr '\0' a)`})
	if res := run(t, s, Request{Session: "fits", Command: `echo "${#FITS}"`}); res.Stdout != "100000\n" {
		t.Errorf("a variable under the limit was not carried: %q %q", res.Stdout, res.Stderr)
	}
}

// TestResetWinsOverAnOlderCommand starts a command that changes the state
// and, while it runs, resets the session; the older command ends after the
// reset and its state is dropped: the reset wins.
func TestResetWinsOverAnOlderCommand(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	start := t.TempDir()
	release := filepath.Join(t.TempDir(), "release")
	started := make(chan struct{}, 1)
	older := make(chan Result, 1)
	go func() {
		res, _ := s.Run(context.Background(), Request{Session: "r", Dir: start,
			Command: `cd / && export OLD=1; while [ ! -e ` + release + ` ]; do sleep 0.01; done`,
			OnEvent: func(e Event) {
				if e.Event == EventStart {
					started <- struct{}{}
				}
			}})
		older <- res
	}()
	<-started
	run(t, s, Request{Session: "r", Dir: start, Command: "true", ResetSession: true})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-older; res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("the older command: %+v", res)
	}
	res := run(t, s, Request{Session: "r", Command: `echo "$PWD ${OLD-unset}"`})
	if want, _ := filepath.EvalSymlinks(start); res.Stdout != want+" unset\n" {
		t.Errorf("after the reset, the older command's state was saved: %q, want %q", res.Stdout, want+" unset\n")
	}
}

// TestXtraceNeverShowsCorralsScript turns on bash's trace every way a
// command can (set -x in the command, SHELLOPTS=xtrace in its environment,
// BASH_XTRACEFD pointing at stderr) and requires that neither corral's
// start-up script nor its EXIT trap appear in the output, with and without
// a journal (the start gate), while the command's own lines are traced.
func TestXtraceNeverShowsCorralsScript(t *testing.T) {
	t.Parallel()
	sups := map[string]*Supervisor{"plain": newSup(t, Config{}), "gated": newSup(t, Config{Journal: openJournal(t, t.TempDir())})}
	for name, s := range sups {
		for _, tc := range []struct {
			label string
			req   Request
		}{
			{"set -x", Request{Command: "set -x; cd / && echo hi"}},                                                                         // in the command
			{"SHELLOPTS", Request{Command: "cd / && echo hi", Env: map[string]string{"SHELLOPTS": "xtrace"}}},                               // from the environment
			{"BASH_XTRACEFD", Request{Command: "exec 7>&2; BASH_XTRACEFD=7; set -x; cd / && echo hi"}},                                      // a dup of stderr
			{"BASH_XTRACEFD env", Request{Command: "cd / && echo hi", Env: map[string]string{"SHELLOPTS": "xtrace", "BASH_XTRACEFD": "2"}}}, // both inherited
		} {
			req := tc.req
			req.Session = "x-" + strings.ReplaceAll(tc.label, " ", "")
			res := run(t, s, req)
			for _, leak := range []string{"CORRAL", "corral-state", "exec 4", "trap ", "/dev/fd/", "builtin"} {
				if strings.Contains(res.Stderr+res.Stdout, leak) {
					t.Errorf("%s, %s: corral's script shows (%q): stderr %q", name, tc.label, leak, res.Stderr)
				}
			}
			if !strings.Contains(res.Stderr, "+ echo hi") || res.Stdout != "hi\n" {
				t.Errorf("%s, %s: the command's own trace is missing: stdout %q stderr %q", name, tc.label, res.Stdout, res.Stderr)
			}
		}
	}
}

// TestStaticRenameIsFollowed renames, with a static command (one whose
// shell is not asked to report), the directory the session is in: the next
// command starts in the directory under its new name, as it would after a
// reporting command (the shell's pwd -P), not in the start directory.
func TestStaticRenameIsFollowed(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	base, _ := filepath.EvalSymlinks(t.TempDir())
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, s, Request{Session: "mv", Dir: base, Command: "cd " + a})
	mv := "mv " + a + " " + b
	if !shellstate.LeavesAlone(mv) {
		t.Fatalf("%q is not static", mv)
	}
	run(t, s, Request{Session: "mv", Command: mv})
	if res := run(t, s, Request{Session: "mv", Command: "pwd"}); res.Stdout != b+"\n" || res.Stderr != "" {
		t.Errorf("after the rename: stdout %q stderr %q, want %s", res.Stdout, res.Stderr, b)
	}
}

// TestDeletedSessionGetsNoSpill deletes a session while a command of it
// runs; the command then prints more than its view holds, and writes no
// spill file: nothing of the deleted session comes back on disk. A command
// of the session started after the deletion spills as usual.
func TestDeletedSessionGetsNoSpill(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s := newSup(t, Config{DataDir: data})
	release := filepath.Join(t.TempDir(), "release")
	flood := "head -c 300000 /dev/zero | tr '\\0' x"
	started := make(chan struct{}, 1)
	older := make(chan Result, 1)
	go func() {
		res, _ := s.Run(context.Background(), Request{Session: "del",
			Command: `while [ ! -e ` + release + ` ]; do sleep 0.01; done; ` + flood,
			OnEvent: func(e Event) {
				if e.Event == EventStart {
					started <- struct{}{}
				}
			}})
		older <- res
	}()
	<-started
	if err := s.Sessions().Delete("del"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := <-older
	if !res.StdoutInfo.Truncated || res.StdoutInfo.SpillPath != "" {
		t.Errorf("the command of the deleted session: truncated %v, spill %q", res.StdoutInfo.Truncated, res.StdoutInfo.SpillPath)
	}
	filepath.WalkDir(data, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(path, "del") {
			t.Errorf("the deleted session is back on disk: %s", path)
		}
		return nil
	})
	if res := run(t, s, Request{Session: "del", Command: flood}); res.StdoutInfo.SpillPath == "" {
		t.Errorf("a command started after the deletion wrote no spill: %+v", res.StdoutInfo)
	}
}
