package supervisor

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/creack/pty"
)

// Terminal sizes a request may ask for.
const (
	DefaultTTYCols = 120
	DefaultTTYRows = 40
	// MaxTTYCells bounds one side of a terminal.
	MaxTTYCells = 1000
)

// TTYSize is a terminal's size in character cells.
type TTYSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// check validates a requested size; a zero side takes its default.
func (sz TTYSize) check() (TTYSize, error) {
	if sz.Cols == 0 {
		sz.Cols = DefaultTTYCols
	}
	if sz.Rows == 0 {
		sz.Rows = DefaultTTYRows
	}
	if sz.Cols < 1 || sz.Cols > MaxTTYCells || sz.Rows < 1 || sz.Rows > MaxTTYCells {
		return sz, invalid("tty: cols and rows must be between 1 and %d, got %dx%d", MaxTTYCells, sz.Cols, sz.Rows)
	}
	return sz, nil
}

// terminal is the PTY of a command run with Request.TTY (docs/terminals.md).
// The command's shell leads a new session with the slave as its controlling
// terminal and as its stdin, stdout and stderr; the master is ours: its reads
// are the command's one output stream, its writes the command's input.
type terminal struct {
	master *os.File // in the runtime's poller: input writes, resize, termios
	slave  *os.File // the child's; closed once the child started
	path   string   // the slave's path, /dev/pts/N
	dev    uint64   // the slave's device number

	mu   sync.Mutex
	size TTYSize // guarded by mu
}

// openTerminal opens a PTY of size sz. On error nothing is left open.
func openTerminal(sz TTYSize) (*terminal, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("supervisor: tty: %w", err)
	}
	t := &terminal{master: master, slave: slave, path: slave.Name(), size: sz}
	if err := t.setSize(sz); err != nil {
		master.Close()
		slave.Close()
		return nil, err
	}
	t.dev = deviceOf(slave)
	return t, nil
}

// setSize sets the terminal's size; the kernel sends SIGWINCH to its
// foreground process group when it changed (tty_do_resize).
func (t *terminal) setSize(sz TTYSize) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := pty.Setsize(t.master, &pty.Winsize{Cols: uint16(sz.Cols), Rows: uint16(sz.Rows)}); err != nil {
		return fmt.Errorf("supervisor: tty: set size: %w", err)
	}
	t.size = sz
	return nil
}

// getSize returns the terminal's size.
func (t *terminal) getSize() TTYSize {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// withFd runs fn on f's descriptor without taking it out of the runtime's
// poller (f.Fd would switch it to blocking mode, and its deadlines would no
// longer work).
func withFd(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// errNoTTY is why a terminal cannot be had where canTTY is false: there is
// no PTY on Windows (ConPTY is not supported).
var errNoTTY = errors.New("a terminal (tty) is not supported on Windows")

// ttyTerm is the TERM a command on a terminal sees.
const ttyTerm = "xterm-256color"

// openOutputs makes the command's output: both pipes (outputs.open), or,
// for a command with a terminal, the terminal, whose master is the stdout
// stream (stderr is at its end from the start). The write ends it returns
// are the child's; nil with a terminal, whose slave is. On error nothing is
// left open.
func (p *proc) openOutputs() (wOut, wErr *os.File, err error) {
	if p.v.tty == nil {
		wOut, wErr, err = p.outs.open()
		if err != nil {
			return nil, nil, fmt.Errorf("supervisor: output pipes: %w", err)
		}
		return wOut, wErr, nil
	}
	t, err := openTerminal(*p.v.tty)
	if err != nil {
		return nil, nil, err
	}
	fd, err := t.readEnd()
	if err != nil {
		t.master.Close()
		t.slave.Close()
		return nil, nil, fmt.Errorf("supervisor: tty: %w", err)
	}
	p.term, p.screen = t, newScreen(p.s.cfg.Emulator)
	p.outs.useTerminal(fd)
	return nil, nil, nil
}

// ErrNoTerminal: the job runs without a terminal (Resize, Screen).
// INVALID_ARGUMENT; it also matches ErrInvalidRequest.
var ErrNoTerminal = errors.New("supervisor: the job has no terminal")

// Resize sets the size of the terminal of a running job; the kernel sends
// SIGWINCH to its foreground process group. Errors: ErrNotFound,
// ErrInvalidRequest for a bad size, ErrNoTerminal for a job without a
// terminal, ErrJobStdin (which is also ErrInvalidRequest) once it exited.
func (h *Jobs) Resize(id string, sz TTYSize) error {
	j, err := h.s.jobs.get(id)
	if err != nil {
		return err
	}
	if sz.Cols == 0 || sz.Rows == 0 {
		return invalid("resize: cols and rows are both required, got %dx%d", sz.Cols, sz.Rows)
	}
	if sz, err = sz.check(); err != nil {
		return err
	}
	if j.term == nil {
		return &RequestError{Reason: fmt.Sprintf("job %s runs without a terminal (start it with tty)", id), Kind: ErrNoTerminal}
	}
	j.stdinMu.Lock() // the master is closed only after the job ended
	defer j.stdinMu.Unlock()
	if _, ended := j.exited(); ended {
		return stdinError("job %s has exited", id)
	}
	if err := j.term.setSize(sz); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return stdinError("job %s has exited", id) // its end closed the terminal
		}
		return err
	}
	j.mu.Lock()
	j.tty = &sz
	j.mu.Unlock()
	return nil
}
