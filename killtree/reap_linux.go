package killtree

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// reapZombies reaps the zombies among ps (processes attributed to this tree)
// whose parent is this process: orphans reparented to us as child subreaper.
// It waits for each by PID with WNOHANG, never with wait4(-1), and never for
// the leader or another tree's leader or a watchdog (ownChildren): os/exec
// reaps those, and stealing their status makes cmd.Wait fail with "no child
// processes" (docs/killtree.md §2.3, E12). It returns how many it reaped, or, if
// some could not be reaped yet (EINTR, or not yet waitable), a negative
// count so the caller scans again.
func (t *Tree) reapZombies(ps []proc) int {
	n := 0
	pending := false
	for _, p := range ps {
		if !t.ours(p) {
			continue
		}
		var ws unix.WaitStatus
		var ru unix.Rusage
		got, err := unix.Wait4(p.pid, &ws, unix.WNOHANG, &ru)
		for errors.Is(err, unix.EINTR) {
			got, err = unix.Wait4(p.pid, &ws, unix.WNOHANG, &ru)
		}
		switch {
		case err == nil && got == p.pid:
			n++
			t.addReaped(&ru)
		case err == nil: // not waitable yet: look again
			pending = true
		}
		// ECHILD: not our child after all (its real parent reaps it).
	}
	if pending && n == 0 {
		return -1
	}
	return n
}

// reapable reports whether ps holds a zombie reapZombies would reap.
func (t *Tree) reapable(ps []proc) bool {
	for _, p := range ps {
		if t.ours(p) {
			return true
		}
	}
	return false
}

// ours reports whether p is a zombie this tree reaps: an orphan reparented
// to this process, not the leader, not another tree's leader or a watchdog.
func (t *Tree) ours(p proc) bool {
	if !p.zombie() || p.ppid != selfPid || p.pid == t.pid {
		return false
	}
	return !ownedElsewhere(p.pid)
}

// addReaped adds the rusage of an orphan this tree reaped to its usage
// (Tree.Usage's rusage source).
func (t *Tree) addReaped(ru *unix.Rusage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reaped.CPUUser += time.Duration(ru.Utime.Nano())
	t.reaped.CPUSystem += time.Duration(ru.Stime.Nano())
	t.reaped.PeakMemory = max(t.reaped.PeakMemory, ru.Maxrss*1024) // KiB (getrusage(2))
}
