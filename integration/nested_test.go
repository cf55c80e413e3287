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
	"github.com/corral-sh/corral/supervisor"
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
// started (issue 12, item 5). The inner sleep must also live beneath the
// outer command's cgroups (issue 16, item 5): before that the inner corral
// made its leaves at the hierarchy's root, beside the outer's.
func TestNestedCorral(t *testing.T) {
	proctest.Heavy(t)
	tiers := workingTiers()
	for _, outer := range tiers {
		for _, inner := range tiers {
			// Not parallel: any corral that starts runs the stale sweep,
			// which would hide a leak of another pair.
			t.Run("outer-"+outer+"/inner-"+inner, func(t *testing.T) {
				runNested(t, outer, inner, false)
			})
		}
	}
}

// TestNestedCorralOuterCrash is TestNestedCorral with the outer corral
// SIGKILLed while the inner command runs, on the cgroup tiers: the outer's
// watchdog kills the outer's leaves, and the inner command must die with
// them, within the outer's grace + 1 s of the crash, because the inner
// corral made its leaves beneath the outer's. Before the inner leaves
// nested (issue 16, item 5) the inner sleep survived with parent PID 1: the
// inner corral and its watchdog died in the outer leaf, and no sweep ran.
func TestNestedCorralOuterCrash(t *testing.T) {
	proctest.Heavy(t)
	for _, outer := range workingTiers() {
		for _, inner := range workingTiers() {
			if outer == "pgroup" || inner == "pgroup" {
				continue // pgroup makes no leaf; its crash is the watchdog's tag sweep, tested in killtree
			}
			t.Run("outer-"+outer+"/inner-"+inner, func(t *testing.T) {
				runNested(t, outer, inner, true)
			})
		}
	}
}

// workingTiers lists the tiers that work here.
func workingTiers() []string {
	var tiers []string
	for _, s := range killtree.Doctor(killtree.Config{}) {
		if s.Works {
			tiers = append(tiers, string(s.Tier))
		}
	}
	return tiers
}

// runNested runs one pair of TestNestedCorral, or with crash of
// TestNestedCorralOuterCrash.
func runNested(t *testing.T, outer, inner string, crash bool) {
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
	outerCg := filepath.Join(dir, "outer-cgroup")
	innerCmd := "trap '' TERM; echo $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + "; exec sleep 100"
	command := fmt.Sprintf("cat /proc/self/cgroup > %s; export %s=%s; CORRAL_CONTAINMENT=%s CORRAL_DATA_DIR=%s %s run --timeout 60 -- %s",
		outerCg, proctest.MarkerEnv, m, inner, filepath.Join(dir, "inner-data"), corralBin, shellQuote(innerCmd))
	timeout := nestedTimeout
	if crash {
		timeout = 60 * time.Second // the crash ends it
	}

	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, "run", "--json", "--timeout", strconv.Itoa(int(timeout/time.Second)),
		"--grace", strconv.Itoa(int(nestedGrace/time.Second)), "--cwd", dir, "--", command)
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
		checkNestedCgroups(t, outerCg, pid)
	}
	if crash && pidfd >= 0 {
		// The outer's watchdog does the kill, and exits after it; it and
		// what it kills are reparented to this process (the subreaper
		// above), whose deferred reap must come after them.
		if wd := watchdogOf(cmd.Process.Pid); wd >= 0 {
			defer waitExit(t, wd, 5*time.Second)
		}
		start = time.Now()
		_ = cmd.Process.Kill() // the outer corral crashes
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
	werr := cmd.Wait()
	var res supervisor.Result
	switch {
	case crash:
		if werr == nil {
			t.Fatalf("outer corral exited 0 after SIGKILL; stdout: %s", stdout.Bytes())
		}
	case werr != nil:
		t.Fatalf("outer corral: %v; stderr: %s", werr, stderr.Bytes())
	default:
		res = decodeResult(t, stdout.Bytes())
		t.Logf("outer returned after %v: kill %+v", time.Since(start).Round(time.Millisecond), res.Kill)
		if !res.TimedOut {
			t.Errorf("outer Result not timed out: %+v", res)
		}
		// The inner command lives in the outer leaf: the outer kill counts
		// it as a member, not as an escapee caught outside (as the stale
		// sweep of the inner instance did before issue 16, item 5).
		if outer != "pgroup" && inner != "pgroup" && res.Kill.Escapees != 0 {
			t.Errorf("outer kill found %d escapees, want 0: the inner tree was outside the outer leaf", res.Kill.Escapees)
		}
	}
	if pidfd < 0 {
		t.Fatal("the inner command never wrote its PID")
	}
	limit := start.Add(nestedTimeout + nestedGrace + time.Second)
	if crash {
		limit = start.Add(nestedGrace + time.Second)
	}
	select {
	case at := <-died:
		if at.After(limit) {
			t.Errorf("inner command %d died %v after the outer started (crashed: %v), past the limit", pid, at.Sub(start).Round(time.Millisecond), crash)
		}
	case <-time.After(time.Until(limit)):
		_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) // the test's own cleanup
		// Reaped here if it was reparented to the test process (ECHILD
		// otherwise), so that no zombie is left for the next test.
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED, nil)
		t.Errorf("inner command %d alive %v after the outer started (crashed: %v), past the limit; outer Result kill %+v",
			pid, time.Since(start).Round(time.Millisecond), crash, res.Kill)
	}
}

// watchdogOf returns a pidfd on the watchdog that the corral process pid
// started, or -1 when it has none.
func watchdogOf(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) || !bytes.Contains(cmdline, []byte("corral-watchdog")) {
			continue
		}
		if fd, err := unix.PidfdOpen(p, 0); err == nil {
			return fd
		}
	}
	return -1
}

// waitExit waits until the process of pidfd fd has exited, at most within,
// and closes fd.
func waitExit(t *testing.T, fd int, within time.Duration) {
	t.Helper()
	defer unix.Close(fd)
	deadline := time.Now().Add(within)
	for !pidfdExited(fd) {
		if time.Now().After(deadline) {
			t.Errorf("the outer watchdog still runs %v after the crash", within)
			return
		}
		time.Sleep(5 * time.Millisecond) // polling the pidfd
	}
}

// checkNestedCgroups requires process pid (the inner command) to live, in
// every hierarchy where the outer command (whose /proc/self/cgroup is in
// file outerCg) had a cgroup other than the root, in that cgroup or beneath
// it: the inner corral makes its leaves beneath its own cgroups, which are
// the outer command's.
func checkNestedCgroups(t *testing.T, outerCg string, pid int) {
	t.Helper()
	b, err := os.ReadFile(outerCg)
	if err != nil {
		t.Fatalf("the outer command's cgroups: %v", err)
	}
	in, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatalf("the inner command's cgroups: %v", err)
	}
	outer, inner := cgroupLines(string(b)), cgroupLines(string(in))
	for h, op := range outer {
		if op == "/" {
			continue
		}
		if ip := inner[h]; ip != op && !strings.HasPrefix(ip, op+"/") {
			t.Errorf("inner command in %q %s, not beneath the outer command's %s", h, ip, op)
		}
	}
}

// cgroupLines maps each hierarchy of a /proc/<pid>/cgroup text ("ID:controllers")
// to its path.
func cgroupLines(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		i := strings.LastIndex(line, ":")
		if i < 0 {
			continue
		}
		out[line[:i]] = line[i+1:]
	}
	return out
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
