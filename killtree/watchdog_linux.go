package killtree

import (
	"errors"
	"fmt"
	"github.com/corral-sh/corral/killtree/internal/procfs"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The watchdog is this binary re-executed (/proc/self/exe) with argv[0]
// watchdogArg0: one process per Manager, in its own session and outside
// every containment, started through the same hook as the reaper (reexec
// in reaper_linux.go), so it needs neither bash nor anything but the
// running binary. Its arguments are this instance's name and its
// directories, one per cgroup hierarchy. It reads its stdin and does
// nothing until EOF (the supervisor exited or was killed): then it runs the
// same Go code as the stale sweep (guardInstance): every leaf under those
// directories but the supervisor's own (see leaveHome, where the watchdog
// may live itself) is killed (cgroup.kill, or freeze, kill, thaw) and
// removed, then every process still carrying one of the instance's tags
// (processes that left their cgroup or had none) is killed, and it exits.
// It needs no message per
// command: every containment of the instance is under its directories, and
// every command's tag starts with the instance's name, so nothing started
// is ever outside its reach, not even between a start and a registration.
// Close ends it with SIGKILL: before EOF it has done nothing, so a kill is a
// quit that need not wait for the re-executed binary's start-up (and a
// Manager's Close does its other work before it waits for the reaping).
const (
	watchdogArg0 = "corral-watchdog"
	watchdogEnv  = "CORRAL_KILLTREE_WATCHDOG"
)

// watchdogPath is the binary the watchdog runs: this one. A variable for
// the tests, which make its start fail.
var watchdogPath = "/proc/self/exe"

// runWatchdog is the watchdog's whole life; it returns its exit code.
func runWatchdog(args []string) int {
	if len(args) < 1 || !validInstance(args[0]) {
		fmt.Fprintf(os.Stderr, "killtree: watchdog: bad instance %q\n", args)
		return 2
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // EOF or a read error: the supervisor is gone
	guardInstance(args[0], args[1:])
	return 0
}

// guardInstance kills what instance inst left behind: the leaves under its
// directories dirs, then the processes carrying its tags; then it removes
// the directories (an EBUSY one holds the supervisor leaf, where this
// process may live).
func guardInstance(inst string, dirs []string) {
	for _, d := range dirs {
		sweepInstance(d)
	}
	killTagged(inst)
	for _, d := range dirs {
		_ = unix.Rmdir(d) // EBUSY: the supervisor leaf is still there
	}
}

// killTagged SIGKILLs every process whose environment carries a tag of
// instance inst (EnvTag=<inst>.<id>), in up to ten passes over /proc: a
// tagged process may fork while it is being found.
func killTagged(inst string) {
	prefix := EnvTag + "=" + inst + "."
	buf := make([]byte, 4096)
	for range 10 {
		pids, err := procfs.Pids()
		if err != nil {
			return
		}
		hits := 0
		for _, pid := range pids {
			if pid == selfPid || !procfs.EnvironHasPrefix(pid, prefix, buf) {
				continue
			}
			_ = unix.Kill(pid, unix.SIGKILL) // ESRCH: gone meanwhile
			hits++
		}
		if hits == 0 {
			return
		}
	}
}

// watchdog is the handle on the watchdog process; a nil *watchdog does
// nothing.
type watchdog struct {
	cmd *exec.Cmd

	mu    sync.Mutex
	stdin io.WriteCloser // guarded by mu; nil once closed
}

// startWatchdog starts the watchdog of instance inst, whose containments
// live under dirs.
func startWatchdog(inst string, dirs []string) (*watchdog, error) {
	cmd := &exec.Cmd{
		Path: watchdogPath,
		Args: append([]string{watchdogArg0, inst}, dirs...),
		// One P: it starts the runtime and then blocks reading its
		// stdin, and it should take as little as it can of the CPU the
		// supervisor and the first command start on.
		Env: []string{watchdogEnv + "=1", "GOMAXPROCS=1"},
		// Its own session: no signal a command sends to its group or
		// session reaches it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("killtree: watchdog: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("killtree: watchdog: %w", err)
	}
	ownChildren.Store(cmd.Process.Pid, struct{}{})
	return &watchdog{cmd: cmd, stdin: w}, nil
}

// kill ends the watchdog without letting it kill anything: SIGKILL before
// its stdin closes. It does not wait: reap does, so that what its caller
// does between the two overlaps the kernel's teardown of the process.
func (w *watchdog) kill() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	stdin := w.stdin
	w.stdin = nil
	w.mu.Unlock()
	if stdin == nil {
		return nil
	}
	kerr := w.cmd.Process.Kill() // unreaped, so its PID is still its own
	cerr := stdin.Close()        // after the kill: EOF would start its sweep
	return errors.Join(kerr, cerr)
}

// reap waits for the exit of the watchdog kill ended.
func (w *watchdog) reap() {
	if w == nil {
		return
	}
	_ = w.cmd.Wait() // killed, as asked
	ownChildren.Delete(w.cmd.Process.Pid)
}

// parseInstance splits an instance name, "<pid>-<start time>" (instance),
// into its two decimal numbers; ok is false for any other name.
func parseInstance(name string) (pid, start string, ok bool) {
	pid, start, ok = strings.Cut(name, "-")
	return pid, start, ok && decimal(pid) && decimal(start)
}

// decimal reports whether s is one or more ASCII digits.
func decimal(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func validInstance(name string) bool {
	_, _, ok := parseInstance(name)
	return ok
}

// sweepStale kills and removes the containments of instances under parent
// whose owner is no longer alive (a crashed supervisor; docs/killtree.md
// §8.1 step 7): cgroup.kill or freeze-kill-thaw on every leaf, then rmdir. It
// returns the PIDs it found in those leaves (a PID may appear once per
// hierarchy). It looks only where this process places its own instances
// (place): the instances of corrals that live in the same cgroup. An inner
// corral's instances, nested in an outer one's leaf, are the outer leaf's
// (its kill reaches them, its removal removes them), and an inner corral
// never sees an outer one's. A dead instance's supervisor leaf (leaveHome)
// is removed once empty, never killed: what it holds is no containment's.
func sweepStale(mnt *mounts, parent string) []int {
	var found []int
	for _, root := range mnt.roots() {
		base := mnt.place(root, parent)
		ents, err := os.ReadDir(base)
		if err != nil {
			continue
		}
		for _, e := range ents {
			pid, start, ok := parseInstance(e.Name())
			if !e.IsDir() || !ok || ownerAlive(pid, start) {
				continue
			}
			inst := filepath.Join(base, e.Name())
			found = append(found, sweepInstance(inst)...)
			_ = unix.Rmdir(inst) // EBUSY: a leaf would not die; the next sweep retries
		}
	}
	return found
}

// sweepInstance kills and removes every leaf of the instance directory inst
// (one hierarchy) and returns the PIDs it found there. The supervisor leaf
// (leaveHome) is removed once empty, never killed: what it holds is no
// containment's.
func sweepInstance(inst string) []int {
	var found []int
	leaves, _ := os.ReadDir(inst)
	for _, l := range leaves {
		if !l.IsDir() {
			continue
		}
		if l.Name() == supervisorLeaf {
			_ = unix.Rmdir(filepath.Join(inst, l.Name())) // EBUSY: something lives there still; so does the instance directory
			continue
		}
		found = append(found, killStaleLeaf(filepath.Join(inst, l.Name()))...)
	}
	return found
}

// ownerAlive reports whether the process pid runs with the given start
// time. A zombie owner is dead: it runs no code, and when it was killed
// together with its watchdog (a corral nested in another one's cgroup,
// ended by that one's cgroup.kill), nothing else ends its containments.
func ownerAlive(pid, start string) bool {
	p, err := strconv.Atoi(pid)
	if err != nil {
		return false
	}
	st, ok := readStat(p, make([]byte, 1024))
	return ok && !st.zombie() && strconv.FormatUint(st.start, 10) == start
}

// killStaleLeaf kills what a stale leaf and the cgroups nested in it hold
// (thawing those that froze themselves), removes them, children first, and
// returns the PIDs it found there.
func killStaleLeaf(dir string) []int {
	var found []int
	switch {
	case fileExists(filepath.Join(dir, "cgroup.kill")):
		found, _ = readPidsTree(dir)
		_ = writeFile(filepath.Join(dir, "cgroup.kill"), "1")
		thawNested(dir)
		_ = pollUntilTimeout(time.Second, func() bool { return !populated(filepath.Join(dir, "cgroup.events")) })
	case fileExists(filepath.Join(dir, "freezer.state")):
		found, _ = (&cgroup1{freezer: dir}).kill(time.Now().Add(time.Second))
	default: // a pids-only leaf: whatever is left escaped the other cgroups
		_ = pollUntilTimeout(time.Second, func() bool {
			p, _ := readPidsTree(dir)
			for _, pid := range p {
				_ = unix.Kill(pid, unix.SIGKILL) // ESRCH: gone meanwhile
			}
			found = append(found, p...)
			return len(p) == 0
		})
	}
	_ = rmTree(dir)
	return found
}

// reapStale reaps those of pids (found by sweepStale, killed) that are
// zombie children of this process and owned by no tree or watchdog here:
// processes of a dead instance reparented to this subreaper. It waits for
// each at most a second.
func reapStale(pids []int) {
	buf := make([]byte, 1024)
	deadline := time.Now().Add(time.Second)
	for _, pid := range pids {
		for {
			p, ok := readStat(pid, buf)
			if !ok || p.ppid != selfPid || ownedElsewhere(pid) {
				break
			}
			if p.zombie() { // a zombie's PID cannot have been reused
				var ws unix.WaitStatus
				if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid || (err != nil && !errors.Is(err, unix.EINTR)) {
					break // reaped, or not ours to reap (ECHILD)
				}
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond) // a killed process on its way out; not synchronisation
		}
	}
}

// sweepDeadInstances runs the stale sweep from a tree's way down, so that
// the containments of a corral instance that died with this tree (a corral
// run inside the command) die with it too: an outer cgroup.kill ends the
// inner corral and its watchdog at once, while the inner command lives in a
// cgroup of its own, outside the outer containment, and would otherwise
// live until the next New anywhere. The processes it killed that were
// reparented to this process (their corral was a descendant of ours) are
// the tree's: they are marked for reaping and returned; what it killed of
// other dead instances is not counted.
func (t *Tree) sweepDeadInstances() []int {
	var ours []int
	buf := make([]byte, 1024)
	seen := map[int]bool{}
	for _, pid := range sweepStale(t.m.plat.mnt, t.m.plat.cfg.CgroupParent) {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if p, ok := readStat(pid, buf); ok && p.ppid == selfPid && !ownedElsewhere(pid) {
			ours = append(ours, pid)
		}
	}
	t.mu.Lock()
	for _, pid := range ours {
		t.st.dead[pid] = true
	}
	t.mu.Unlock()
	return ours
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func pollUntilTimeout(d time.Duration, done func() bool) error {
	ctx, cancel := contextUntil(time.Now().Add(d))
	defer cancel()
	return pollUntil(ctx, done)
}
