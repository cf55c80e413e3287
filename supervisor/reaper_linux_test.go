package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/killtree"
)

// TestReaperResult runs commands through a Supervisor whose trees have a
// reaper (killtree.Config.Reaper) on the pgroup tier, which every machine
// has: the Result says what the shell did, not what became of the reaper.
func TestReaperResult(t *testing.T) {
	s := newSup(t, Config{Containment: killtree.Config{Tier: killtree.TierPgroup, Reaper: true},
		Grace: 200 * time.Millisecond})
	cases := []struct {
		name    string
		command string
		timeout time.Duration
		code    int    // -1: no exit code
		signal  string // "" when it exited
		stdout  string
	}{
		// An exit code, relayed through the status pipe.
		{"exit", "echo out; exit 3", 0, 3, "", "out\n"},
		// A shell killed by a signal: the signal, not the reaper's status.
		{"signal", "kill -USR1 $$", 0, -1, "SIGUSR1", ""},
		// A timeout: the shell dies of the grace phase's SIGTERM, which the reaper ignores.
		{"timeout", "echo before; sleep 60", time.Second, -1, "SIGTERM", "before\n"},
		// A clean exit.
		{"true", "true", 0, 0, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := marked(t, Request{Command: c.command, Timeout: c.timeout})
			res := run(t, s, req)
			if c.code >= 0 && (res.ExitCode == nil || *res.ExitCode != c.code) {
				t.Errorf("exitCode %v, want %d", res.ExitCode, c.code)
			}
			if c.code < 0 && res.ExitCode != nil {
				t.Errorf("exitCode %d, want none", *res.ExitCode)
			}
			if res.Signal != c.signal {
				t.Errorf("signal %q, want %q", res.Signal, c.signal)
			}
			if res.Stdout != c.stdout {
				t.Errorf("stdout %q, want %q", res.Stdout, c.stdout)
			}
			if res.Kill.Processes != 0 && c.name != "timeout" {
				t.Errorf("kill %+v: the reaper was counted", res.Kill)
			}
		})
	}
}

// TestReaperScrubbedDaemon is the hole 1 through the whole
// supervisor: a daemon that left the session, replaced its environment and
// its name, and whose parent exited at once, is found as lingering and
// killed; the test tracks it by a pidfd, which the command cannot scrub.
func TestReaperScrubbedDaemon(t *testing.T) {
	s := newSup(t, Config{Containment: killtree.Config{Tier: killtree.TierPgroup, Reaper: true}})
	pidfile := filepath.Join(t.TempDir(), "pids")
	cmd := `(setsid env -i /bin/bash -c 'echo $$ > ` + pidfile + `; exec -a X sleep 60' </dev/null >/dev/null 2>&1 &); ` +
		`while [ ! -s ` + pidfile + ` ]; do sleep 0.01; done; echo hi`
	res, err := s.Run(context.Background(), Request{Command: cmd, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q", b)
	}
	// Either the daemon is gone (pidfd_open fails) or its pidfd says it exited.
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		defer unix.Close(fd)
		if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 1000); n == 0 {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			t.Errorf("the daemon %d survived", pid)
		}
	}
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "hi\n" {
		t.Errorf("exitCode %v stdout %q, want 0 and hi", res.ExitCode, res.Stdout)
	}
	if res.Kill.Lingering < 1 || res.Kill.Processes < 1 {
		t.Errorf("kill %+v, want the daemon lingering and killed", res.Kill)
	}
}
