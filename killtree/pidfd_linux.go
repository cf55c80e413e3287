package killtree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// pidfdSignalProcessGroup is PIDFD_SIGNAL_PROCESS_GROUP from
// include/uapi/linux/pidfd.h (Linux 6.9); x/sys v0.50.0 does not define it.
const pidfdSignalProcessGroup = 1 << 2

var (
	groupProbeOnce sync.Once
	groupProbeOK   bool
)

// pidfdGroupSignal reports, probing once, whether pidfd_send_signal accepts
// PIDFD_SIGNAL_PROCESS_GROUP (kernels before 6.9 return EINVAL for the flag).
func pidfdGroupSignal() bool {
	groupProbeOnce.Do(func() {
		fd, err := unix.PidfdOpen(os.Getpid(), 0)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		groupProbeOK = unix.PidfdSendSignal(fd, 0, nil, pidfdSignalProcessGroup) == nil
	})
	return groupProbeOK
}

// afterStart runs right after cmd.Start: nobody can have reaped the leader
// yet (only the caller's cmd.Wait does, after Start returns), so pidfd_open
// on its PID is race-free. The pidfd refers to this leader for good: once
// the caller has reaped it its number may be recycled, but the pidfd never
// refers to the process that gets it.
//
// The pidfd is not registered with the runtime's poller and no goroutine
// watches it: leaderExited polls it, and Exited starts a watcher on a copy
// only when asked (startWatch). A caller that watches the exit itself, as
// the supervisor does in its own poll loop, then costs no goroutine and no
// poller traffic per command.
func (t *Tree) afterStart() error {
	t.st.seen = map[int]uint64{}
	t.st.groups = map[int]bool{}
	t.st.dead = map[int]bool{}
	t.st.escaped = map[int]uint64{}
	t.st.left = map[int]uint64{}
	if cg, ok := t.c.(interface{ leafSuffix() string }); ok {
		t.st.cgLeaf = cg.leafSuffix()
	}
	fd, err := unix.PidfdOpen(t.pid, 0)
	if err != nil {
		return fmt.Errorf("killtree: pidfd_open %d: %w", t.pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	t.st.pidfd = f
	ownChildren.Store(t.pid, f)
	return nil
}

// exitPending polls the leader's pidfd without waiting: readable means the
// leader has exited. A closed pidfd reads as false (release marks the exit).
func (t *Tree) exitPending() bool {
	t.mu.Lock()
	f := t.exitFile()
	t.mu.Unlock()
	return f != nil && pidfdReadable(f)
}

// pidfdExited polls the leader's own pidfd: with a reaper, the reaper's
// exit, which comes after the shell's.
func (t *Tree) pidfdExited() bool {
	t.mu.Lock()
	f := t.st.pidfd
	t.mu.Unlock()
	return f == nil || pidfdReadable(f)
}

// pidfdReadable polls f once without waiting.
func pidfdReadable(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ready := false
	_ = rc.Control(func(fd uintptr) { ready = readable(fd) }) // an error: f was closed, ready stays false
	return ready
}

// readable polls descriptor fd once without waiting.
func readable(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// startWatch starts the goroutine behind Exited, once: it waits on a
// non-blocking copy of the pidfd in the runtime's poller (no thread held)
// and marks the exit when the copy turns readable, or when release closes
// it. O_NONBLOCK then holds for the original too (one open file
// description); nothing waits on the original with a blocking call. Under
// t.mu, so that release either sees the copy or runs first (and then has
// marked the exit already).
func (t *Tree) startWatch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.pidfd == nil {
		return // released: the exit is marked
	}
	rc, err := t.exitFile().SyscallConn()
	if err != nil {
		return
	}
	dup := -1
	_ = rc.Control(func(fd uintptr) {
		if d, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); err == nil {
			dup = d
		}
	})
	if dup < 0 || unix.SetNonblock(dup, true) != nil {
		// No watcher possible (out of descriptors): poll instead.
		if dup >= 0 {
			unix.Close(dup)
		}
		t.wg.Add(1)
		go t.pollExit()
		return
	}
	w := os.NewFile(uintptr(dup), "pidfd-watch")
	t.st.watch = w
	wrc, err := w.SyscallConn()
	if err != nil {
		return
	}
	t.wg.Add(1)
	go t.watchExit(wrc)
}

// watchExit marks the exit when the watcher's pidfd copy turns readable (the
// leader has exited), or when release closes it (after killing the tree).
func (t *Tree) watchExit(rc interface {
	Read(func(uintptr) bool) error
}) {
	defer t.wg.Done()
	defer t.markExited()
	_ = rc.Read(readable) // an error: the copy was closed
}

// pollExit is watchExit's fallback when the pidfd cannot be copied: it
// polls every 10 ms until the leader exited or the tree was released.
func (t *Tree) pollExit() {
	defer t.wg.Done()
	for !t.leaderExited() {
		t.mu.Lock()
		released := t.st.pidfd == nil
		t.mu.Unlock()
		if released {
			return
		}
		time.Sleep(10 * time.Millisecond) // no descriptor to wait on; not synchronisation
	}
}

// signalGroup sends sig to the leader's process group: through the pidfd
// when the kernel supports group signals, else with kill(-pgid) but only while
// the leader is still unreaped (waitid WNOWAIT), which keeps the group ID
// reserved. ESRCH means the group is empty.
func (t *Tree) signalGroup(sig unix.Signal) error {
	t.mu.Lock()
	f := t.st.pidfd
	t.mu.Unlock()
	if f == nil {
		return os.ErrClosed
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		if pidfdGroupSignal() {
			serr = unix.PidfdSendSignal(int(fd), sig, nil, pidfdSignalProcessGroup)
			return
		}
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil); err != nil {
			serr = fmt.Errorf("killtree: leader %d already reaped: %w", t.pid, err)
			return
		}
		serr = unix.Kill(-t.pid, sig)
	})
	return errors.Join(cerr, serr)
}

func contextUntil(d time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), d)
}
