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
func (t *Tree) afterStart() error {
	t.st.seen = map[int]uint64{}
	t.st.groups = map[int]bool{}
	t.st.dead = map[int]bool{}
	if cg, ok := t.c.(interface{ leafSuffix() string }); ok {
		t.st.cgLeaf = cg.leafSuffix()
	}
	fd, err := unix.PidfdOpen(t.pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("killtree: pidfd_open %d: %w", t.pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	t.st.pidfd = f
	ownChildren.Store(t.pid, f)
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("killtree: pidfd: %w", err)
	}
	t.wg.Add(1)
	go t.watchExit(rc)
	return nil
}

// watchExit closes t.exited when the leader's pidfd turns readable (it has
// exited), or when Close closes the pidfd (after killing the tree). It waits
// in the runtime's netpoller, so it holds no thread.
func (t *Tree) watchExit(rc interface {
	Read(func(uintptr) bool) error
}) {
	defer t.wg.Done()
	defer close(t.exited)
	_ = rc.Read(func(fd uintptr) bool { // an error: the pidfd was closed
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	})
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
