package supervisor

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// outputs are the read ends of the child's stdout and stderr. On Linux they
// are raw non-blocking descriptors that the pump polls (pump_linux.go); they
// are never registered with the runtime's poller.
type outputs struct {
	fd  [2]int   // read ends, stdout and stderr; -1 once closed
	eof [2]bool  // the stream reached EOF (or failed); written by the pump that drains it
	err [2]error // the read error that ended the stream, if any

	wake   *waker        // nil until the first pump that needs one
	stop   atomic.Bool   // stopDrains asked the background pump to give up
	pumped chan struct{} // closed when the background pump returned; nil when none ran
}

// open makes both output pipes. The read ends are non-blocking and
// stay ours; the write ends, the child's, are plain blocking descriptors
// (os.Pipe would register both ends with the runtime's poller, and os/exec
// would then switch the child's end back to blocking mode). On error nothing
// is left open.
func (o *outputs) open() (wOut, wErr *os.File, err error) {
	o.fd = [2]int{-1, -1}
	var w [2]int
	for i := range o.fd {
		var p [2]int
		if err = unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			err = os.NewSyscallError("pipe2", err)
			break
		}
		o.fd[i], w[i] = p[0], p[1]
		if err = unix.SetNonblock(p[0], true); err != nil {
			err = os.NewSyscallError("fcntl", err)
			break
		}
	}
	if err != nil {
		for i := range o.fd {
			if o.fd[i] >= 0 {
				unix.Close(o.fd[i])
				unix.Close(w[i])
				o.fd[i] = -1
			}
		}
		return nil, nil, err
	}
	return os.NewFile(uintptr(w[0]), "|1"), os.NewFile(uintptr(w[1]), "|2"), nil
}

// watch tells the tree which pipes are the command's, for the pipe-holder
// scan. The descriptors stay open until close, after the last scan.
func (o *outputs) watch(p *proc) { p.tree.WatchPipes(o.fd[0], o.fd[1]) }

// close closes the read ends and the waker. The pumps are done with them:
// close runs after drainAll received every stream's end and after the
// background pump returned.
func (o *outputs) close() {
	if o.pumped != nil {
		<-o.pumped
	}
	for i, fd := range o.fd {
		if fd >= 0 {
			unix.Close(fd)
			o.fd[i] = -1
		}
	}
	if o.wake != nil {
		o.wake.close()
	}
}

// waker is an eventfd that makes a pump's poll return: a cancelled context
// (phase one) or stopDrains (the background pump). signal and close are safe
// for concurrent use, so a context.AfterFunc still running when the command
// ends never writes to a closed, perhaps reused, descriptor.
type waker struct {
	mu sync.Mutex
	fd int // -1 once closed; guarded by mu
}

func newWaker() (*waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	return &waker{fd: fd}, nil
}

// signal makes the next (or the current) poll on the waker return.
func (w *waker) signal() {
	one := [8]byte{1}
	w.mu.Lock()
	if w.fd >= 0 {
		_, _ = unix.Write(w.fd, one[:]) // EAGAIN: the counter is full, a wake-up is pending anyway
	}
	w.mu.Unlock()
}

// reset consumes the pending wake-ups. Only the pump that polls calls it.
func (w *waker) reset() {
	var b [8]byte
	w.mu.Lock()
	if w.fd >= 0 {
		_, _ = unix.Read(w.fd, b[:]) // EAGAIN: nothing was pending
	}
	w.mu.Unlock()
}

func (w *waker) close() {
	w.mu.Lock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
	w.mu.Unlock()
}

// ensureWaker creates the waker if there is none yet.
func (o *outputs) ensureWaker() error {
	if o.wake != nil {
		return nil
	}
	w, err := newWaker()
	if err != nil {
		return err
	}
	o.wake = w
	return nil
}

// errNoPollLoop is the reason wait gives when a test turned the poll loop off.
var errNoPollLoop = errors.New("supervisor: poll loop turned off")

// errStopped is what a stream's drain reports when stopDrains ended it
// before EOF.
var errStopped = errors.New("supervisor: drain stopped before EOF")
