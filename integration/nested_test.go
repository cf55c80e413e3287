//go:build linux

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
)

// nestedTimeout and nestedGrace are the outer corral's timeout (time for
// the inner corral to start on a loaded machine) and grace (the CLI's
// default) in TestNestedCorral.
const (
	nestedTimeout = 4 * time.Second
	nestedGrace   = 2 * time.Second
)

// TestNestedCorral runs `corral run` inside `corral run` on every pair of
// tiers that work here (outer × inner, forced through CORRAL_CONTAINMENT).
// The inner command ignores SIGTERM and sleeps; the outer times out. The
// inner sleep must be gone within the outer's timeout + grace + 1 s: the
// test holds a pidfd on it (its PID comes from a file it writes), which the
// command cannot scrub. Before the fix the inner command of a cgroup tier
// inside the same cgroup tier outlived the outer until some later corral
// started (issue 12, item 5).
func TestNestedCorral(t *testing.T) {
	var tiers []string
	for _, s := range killtree.Doctor(killtree.Config{}) {
		if s.Works {
			tiers = append(tiers, string(s.Tier))
		}
	}
	for _, outer := range tiers {
		for _, inner := range tiers {
			// Not parallel: any corral that starts runs the stale sweep,
			// which would hide a leak of another pair.
			t.Run("outer-"+outer+"/inner-"+inner, func(t *testing.T) {
				runNested(t, outer, inner)
			})
		}
	}
}

// runNested runs one pair of TestNestedCorral.
func runNested(t *testing.T, outer, inner string) {
	m := marker(t)
	defer checkGone(t, m)
	// What the outer corral's stale sweep killed of the inner instance may
	// still be a zombie when the outer CLI exits; it is then reparented to
	// this process, the subreaper above, as it would be to init or the next
	// subreaper in real use. Reaped here, so that the zombie oracle of the
	// next test sees none of it (this test runs alone: no other test's
	// child can be lost).
	defer func() {
		for _, z := range proctest.Zombies(os.Getpid()) {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(z.PID, &ws, unix.WNOHANG, nil) // an error: already gone
		}
	}()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	innerCmd := "trap '' TERM; echo $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + "; exec sleep 100"
	command := fmt.Sprintf("export %s=%s; CORRAL_CONTAINMENT=%s CORRAL_DATA_DIR=%s %s run --timeout 60 -- %s",
		proctest.MarkerEnv, m, inner, filepath.Join(dir, "inner-data"), corralBin, shellQuote(innerCmd))

	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, "run", "--json", "--timeout", strconv.Itoa(int(nestedTimeout/time.Second)),
		"--cwd", dir, "--", command)
	cmd.Env = append(os.Environ(), "CORRAL_CONTAINMENT="+outer, "CORRAL_DATA_DIR="+filepath.Join(dir, "outer-data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidfd, pid := openWrittenPid(t, pidFile, 10*time.Second)
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	// The moment the inner command died, watched while the outer runs.
	died := make(chan time.Time, 1)
	stop := make(chan struct{})
	defer close(stop)
	if pidfd >= 0 {
		go func() {
			for !pidfdExited(pidfd) {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond): // polling the pidfd
				}
			}
			died <- time.Now()
		}()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("outer corral: %v; stderr: %s", err, stderr.Bytes())
	}
	res := decodeResult(t, stdout.Bytes())
	t.Logf("outer returned after %v: kill %+v", time.Since(start).Round(time.Millisecond), res.Kill)
	if !res.TimedOut {
		t.Errorf("outer Result not timed out: %+v", res)
	}
	if pidfd < 0 {
		t.Fatal("the inner command never wrote its PID")
	}
	limit := start.Add(nestedTimeout + nestedGrace + time.Second)
	select {
	case at := <-died:
		if at.After(limit) {
			t.Errorf("inner command %d died %v after the outer started, past timeout + grace + 1 s", pid, at.Sub(start).Round(time.Millisecond))
		}
	case <-time.After(time.Until(limit)):
		_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) // the test's own cleanup
		// Reaped here if it was reparented to the test process (ECHILD
		// otherwise), so that no zombie is left for the next test.
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED, nil)
		t.Errorf("inner command %d alive %v after the outer started, past timeout + grace + 1 s; outer Result kill %+v",
			pid, time.Since(start).Round(time.Millisecond), res.Kill)
	}
}

// openWrittenPid waits until path holds a PID and returns a pidfd on it
// and the PID, or -1 when no PID came within limit.
func openWrittenPid(t *testing.T, path string, limit time.Duration) (int, int) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %q: %v", b, err)
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				t.Fatalf("pidfd_open %d: %v", pid, err)
			}
			return fd, pid
		}
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // polling for the file
	}
	return -1, 0
}

// pidfdExited reports whether the process of pidfd has exited.
func pidfdExited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
