package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestArgvRunsTheProgram: a request with Argv runs the program itself, not
// a shell: its words reach it exactly (no shell expansion), it is the
// tree's leader (the job's pid is its own), it is found in the PATH of the
// command's environment, and its listing names it shell-quoted.
func TestArgvRunsTheProgram(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	res := run(t, s, Request{Argv: []string{"printf", "%s|", "$HOME", "a b", "*", ""}})
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "$HOME|a b|*||" {
		t.Fatalf("printf: exit %v stdout %q stderr %q, want the words unexpanded", res.ExitCode, res.Stdout, res.Stderr)
	}

	// A program in a directory only the command's PATH names.
	bin := t.TempDir()
	prog := filepath.Join(bin, "corral-argv-probe")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"$$ $PPID $0 $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res = run(t, s, Request{Argv: []string{"corral-argv-probe", "one two"},
		Env: map[string]string{"PATH": bin + ":" + os.Getenv("PATH")}})
	f := strings.Fields(res.Stdout)
	if len(f) != 5 || f[2] != prog || f[3] != "one" || f[4] != "two" {
		t.Fatalf("probe printed %q (stderr %q), want pid ppid %s one two", res.Stdout, res.Stderr, prog)
	}
	if ppid, _ := strconv.Atoi(f[1]); ppid != os.Getpid() {
		t.Errorf("the program's parent is %d, want this process %d: a shell ran between", ppid, os.Getpid())
	}

	// As a job: the pid is the program's, and the listing quotes its words.
	st, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{Argv: []string{"sleep", "30"}})})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/comm")
	if got := strings.TrimSpace(string(b)); got != "sleep" {
		t.Errorf("the job's pid %d is %q, want the sleep itself", st.Pid, got)
	}
	for _, j := range s.Jobs().List() {
		if j.ID == st.ID && j.Command != "sleep 30" {
			t.Errorf("listed as %q, want %q", j.Command, "sleep 30")
		}
	}
	if _, err := s.Jobs().Kill(st.ID); err != nil {
		t.Fatal(err)
	}
}

// TestArgvRejected: bad argv is a RequestError naming the problem, and
// nothing starts.
func TestArgvRejected(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{}, "argv[0]"},
		{[]string{""}, "argv[0]"},
		{[]string{"echo", "a\x00b"}, "argv[1] contains a NUL byte"},
		{[]string{"corral-no-such-program-xyz"}, `"corral-no-such-program-xyz": no such program in the command's PATH`},
	} {
		_, err := s.Run(t.Context(), Request{Argv: tc.argv})
		var re *RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("argv %q: %v, want a RequestError with %q", tc.argv, err, tc.want)
		}
	}
	if n := s.running.Load(); n != 0 {
		t.Errorf("%d commands running after the rejections", n)
	}
}

// TestArgvSession: a program in a named session starts from the session's
// state (working directory, variables) but saves none, even when it exits
// by itself; the next shell command still sees what the last shell left.
func TestArgvSession(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	run(t, s, Request{Session: "a1", Command: "cd '" + dir + "' && export KEEP=yes"})
	res := run(t, s, Request{Session: "a1", Argv: []string{"bash", "-c", `pwd; echo "$KEEP"; cd /; export KEEP=no`}})
	if res.Stdout != dir+"\nyes\n" {
		t.Errorf("the program saw %q, want the session's %s and KEEP=yes", res.Stdout, dir)
	}
	gotDir, vals := sessionView(t, s, "a1", "KEEP")
	if gotDir != dir || vals[0] != "yes" {
		t.Errorf("after the program the session is at %q with KEEP=%q, want %q and yes: a program saved state", gotDir, vals[0], dir)
	}
}

// TestArgvTreeKilled: a program's tree goes down whole, a setsid child
// included, when its job is killed.
func TestArgvTreeKilled(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	entry, marker := proctest.Marker(t)
	k, v, _ := strings.Cut(entry, "=")
	st, err := s.Jobs().Start(JobRequest{Request: Request{Env: map[string]string{k: v},
		Argv: []string{"bash", "-c", "setsid sleep 300 & sleep 300"}}})
	if err != nil {
		t.Fatal(err)
	}
	proctest.AtLeast(marker, 3, 5*time.Second, nil)
	if _, err := s.Jobs().Kill(st.ID); err != nil {
		t.Fatal(err)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}
