package killtree

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ownChildren holds the PIDs of this process's own children that no tree may
// claim or reap: every tree leader (os/exec reaps it) and every watchdog. A
// leader's entry holds its pidfd: once os/exec has reaped the leader, its PID
// can be recycled before Tree.Close removes the entry (on a busy machine with
// pid_max 32768 that happens within seconds), and the process that got it
// is not the leader (see ownedElsewhere).
var ownChildren sync.Map // pid -> *os.File (a leader's pidfd) or struct{} (a watchdog)

// ownedElsewhere reports whether pid is a child of ours that no tree may
// claim or reap: a watchdog, or a tree's leader not yet reaped.
func ownedElsewhere(pid int) bool {
	v, ok := ownChildren.Load(pid)
	if !ok {
		return false
	}
	f, ok := v.(*os.File)
	return !ok || !reaped(f)
}

// reaped reports whether the process of pidfd f has been reaped, or f is
// closed (its tree is closed, which is after the reap).
func reaped(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	gone := true
	if err := rc.Control(func(fd uintptr) {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		gone = errors.Is(err, unix.ECHILD)
	}); err != nil {
		return true
	}
	return gone
}

// treeState is the Linux baseline's memory of a tree.
type treeState struct {
	pidfd  *os.File       // pidfd of the leader, never registered with the runtime's poller
	watch  *os.File       // the exit watcher's non-blocking copy of pidfd; nil until Exited is called
	seen   map[int]uint64 // pid -> start time of every process ever attributed
	groups map[int]bool   // session and group IDs of attributed processes
	cgLeaf string         // cgroup path suffix (relative), for zombie attribution; "" on pgroup
	dead   map[int]bool   // PIDs the containment kill listed: their zombies are ours to reap
	// leftUnattributed: the last kill's strays pass left processes born
	// while this tree and another lived (Config.OwnProcess; births).
	leftUnattributed bool
	// status is the read end of the reaper's status pipe (Config.Reaper),
	// nil without a reaper; statusRead, ws and wsOK hold what it said.
	status     *os.File
	statusRead bool
	awaited    bool // awaitReaper waited once
	ws         unix.WaitStatus
	wsOK       bool
	// escaped holds the processes (pid -> start time) counted as escapees,
	// so that one process is counted once however many passes meet it.
	escaped map[int]uint64
	// left holds the processes (pid -> start time) a kill could not end
	// by its deadline; Survivors checks which of them still live.
	left map[int]uint64
	// gone records that a scan begun after the leader's exit found no live
	// member (and, on the cgroup tiers, an empty cgroup and nothing that
	// left it) and no zombie of ours to reap. That state is final (only a
	// live member can add one), so Kill has nothing left to do.
	gone bool
}

func (t *Tree) signal(sig syscall.Signal) (int, error) {
	// Frozen or stopped, the members cannot fork between the listing and
	// the signal, and a bomb stops burning the CPU this needs; the signals
	// are delivered at the thaw or the SIGCONT below.
	if err := t.c.pause(true); err == nil {
		defer t.c.pause(false) // a failed thaw leaves Kill to end the tree
	}
	pids, err := t.stop()
	if err != nil {
		return 0, err
	}
	_ = t.signalGroup(unix.Signal(sig)) // ESRCH: the group is gone; its members are in pids anyway
	_ = t.signalGroup(unix.SIGCONT)
	n := 0
	for _, p := range pids {
		if unix.Kill(p, unix.Signal(sig)) == nil {
			n++
		}
		_ = unix.Kill(p, unix.SIGCONT) // ESRCH ignored: it died meanwhile
	}
	return n, nil
}

// release closes the pidfd and the watcher's copy (which ends the watcher)
// and marks the exit: Close killed the tree first.
func (t *Tree) release() error {
	ownChildren.Delete(t.pid)
	t.shellStatus() // read it while the pipe is open: ShellExit works after Close
	t.mu.Lock()
	f, w, s := t.st.pidfd, t.st.watch, t.st.status
	t.st.pidfd, t.st.watch = nil, nil
	t.mu.Unlock()
	defer t.markExited()
	var errs []error
	for _, c := range []*os.File{w, f, s} {
		if c == nil {
			continue
		}
		if err := c.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, fmt.Errorf("killtree: close pidfd: %w", err))
		}
	}
	return errors.Join(errs...)
}
