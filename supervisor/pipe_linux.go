package supervisor

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// outputs are the read ends of the child's stdout and stderr. On Linux they
// start as raw non-blocking descriptors that wait polls on the calling
// goroutine (pump_linux.go), never registered with the runtime's poller; a
// stream that outlives that phase becomes an *os.File in the poller, drained
// by a goroutine of its own.
type outputs struct {
	fd  [2]int      // read ends, stdout and stderr; -1 once closed or handed to f
	f   [2]*os.File // the read ends handed to drain goroutines; nil until then
	eof [2]bool     // the stream reached EOF (or failed) in the poll loop

	// What the poll loop has seen, to tell a short command from a busy one.
	wakeups int
	bytes   int64
}

// open makes both output pipes. The read ends are non-blocking and stay
// ours; the write ends, the child's, are plain blocking descriptors (os.Pipe
// would register both ends with the runtime's poller, and os/exec would then
// switch the child's end back to blocking mode). On error nothing is left
// open.
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

// useTerminal makes fd, a terminal's master (non-blocking), the stdout
// stream; the stderr stream is at its end from the start.
func (o *outputs) useTerminal(fd int) {
	o.fd = [2]int{fd, -1}
	o.eof[stderrStream] = true
}

// watch tells the tree which pipes are the command's, for the pipe-holder
// scan. The descriptors stay open (as themselves or inside f) until close,
// after the last scan.
// A terminal's master (o.fd[0], with no stderr) stands for its slave.
func (o *outputs) watch(p *proc) {
	if o.fd[1] < 0 {
		p.tree.WatchPipes(o.fd[0])
		return
	}
	p.tree.WatchPipes(o.fd[0], o.fd[1])
}

// file hands stream i's descriptor to the runtime's poller as an *os.File.
func (o *outputs) file(i streamIndex) *os.File {
	o.f[i] = os.NewFile(uintptr(o.fd[i]), i.String())
	o.fd[i] = -1
	return o.f[i]
}

// dupReadEnds returns copies of the read ends still open, for the waiting
// watch to count what was printed but not drained (a copy stays valid
// whatever happens to the originals); the caller closes them. It runs
// before the poll loop starts, while the read ends are raw descriptors.
func (o *outputs) dupReadEnds() []*os.File {
	var dups []*os.File
	for i, fd := range o.fd {
		if fd < 0 {
			continue
		}
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			continue // no count of that stream: a wait may be told before its output is read
		}
		dups = append(dups, os.NewFile(uintptr(d), streamIndex(i).String()))
	}
	return dups
}

// close closes the read ends. drainAll received every drain goroutine's end
// first.
func (o *outputs) close() {
	for i := range o.fd {
		switch {
		case o.f[i] != nil:
			o.f[i].Close()
		case o.fd[i] >= 0:
			unix.Close(o.fd[i])
		}
		o.fd[i] = -1
	}
}

// waker is an eventfd that makes the poll loop return when the context is
// cancelled. signal and close are safe for concurrent use, so a
// context.AfterFunc still running when the loop is done never writes to a
// closed, perhaps reused, descriptor.
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

// reset consumes the pending wake-ups. Only the loop that polls calls it.
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
