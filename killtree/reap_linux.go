package killtree

import (
	"errors"
	"math"
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
		switch reaped, err := t.reapOne(p.pid); {
		case reaped:
			n++
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

// reapOne reaps pid if it is an exited child of ours (wait4 with WNOHANG,
// retried on EINTR), adding its usage. Not reaped with a nil error: our
// child, not waitable yet; ECHILD: not our child.
func (t *Tree) reapOne(pid int) (reaped bool, err error) {
	var ru unix.Rusage
	if reaped, err = reapPid(pid, &ru); reaped {
		t.addReaped(&ru)
	}
	return reaped, err
}

// reapPid reaps pid if it is a zombie child of this process (wait4 with
// WNOHANG), filling ru.
func reapPid(pid int, ru *unix.Rusage) (reaped bool, err error) {
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, unix.WNOHANG, ru)
	for errors.Is(err, unix.EINTR) {
		got, err = unix.Wait4(pid, &ws, unix.WNOHANG, ru)
	}
	return err == nil && got == pid, err
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

// settleKilled looks at each process the kill signalled or listed that no
// earlier look saw gone (gone, which it fills): it reaps those that are
// zombies of ours, and reports how many it reaped, or -1 when some are
// still on their way: alive (in their exit, or outliving SIGKILL, which
// the deadline reports), or zombies whose parent was killed too (it reaps
// them, or hands them to us as it ends). A process started after the kill
// began (ticks since boot, began) holds a reused PID and is not ours; nor
// is the leader, which the caller reaps, or a child other code owns.
func (t *Tree) settleKilled(killed, gone map[int]bool, began uint64) int {
	buf := make([]byte, 512)
	n, pending := 0, false
	for pid := range killed {
		if gone[pid] || pid == t.pid || ownedElsewhere(pid) {
			continue
		}
		p, ok := readStat(pid, buf)
		switch {
		case !ok || p.start > began:
			gone[pid] = true
		case !p.zombie():
			pending = true
		case p.ppid != selfPid:
			if killed[p.ppid] && !gone[p.ppid] {
				pending = true
			} else {
				gone[pid] = true // its own parent's to reap
			}
		default:
			switch reaped, err := t.reapOne(pid); {
			case reaped:
				gone[pid] = true
				n++
			case err == nil:
				pending = true // not waitable yet
			default:
				gone[pid] = true // ECHILD: not our child after all
			}
		}
	}
	if n == 0 && pending {
		return -1
	}
	return n
}

// bootTicks is the time since boot in the clock ticks (USER_HZ, 100 a
// second on Linux) of /proc/<pid>/stat's start time; the largest value
// when the clock cannot be read, so that nothing counts as started after.
func bootTicks() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return math.MaxUint64
	}
	return uint64(ts.Sec)*100 + uint64(ts.Nsec)/10_000_000
}
