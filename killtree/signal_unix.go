//go:build unix

package killtree

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// sendSignal sends sig to pid and reports whether it was sent. ESRCH is not
// an error: the process is gone, which is what a kill wants. Any other error
// (EPERM: a process this one may not signal) is returned naming the pid, so
// that a kill that gives up can say why; runc's libcontainer
// signalAllProcesses likewise ignores only ESRCH.
func sendSignal(pid int, sig unix.Signal) (bool, error) {
	err := unix.Kill(pid, sig)
	if err == nil || errors.Is(err, unix.ESRCH) {
		return err == nil, nil
	}
	return false, fmt.Errorf("%v to %d: %w", sig, pid, err)
}

// firstErr keeps the first error a series of signals returned.
type firstErr struct{ err error }

func (f *firstErr) keep(err error) {
	if f.err == nil {
		f.err = err
	}
}

// notEmpty is the error a kill gives up with: the message, wrapping
// ErrNotEmpty and, when a signal failed on the way, the first such error.
func (f *firstErr) notEmpty(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if f.err != nil {
		return fmt.Errorf("%s: %w (a kill failed: %w)", msg, ErrNotEmpty, f.err)
	}
	return fmt.Errorf("%s: %w", msg, ErrNotEmpty)
}
