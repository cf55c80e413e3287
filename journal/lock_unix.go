//go:build unix && !solaris && !aix

package journal

import (
	"os"
	"syscall"
	"time"

	bolterr "go.etcd.io/bbolt/errors"
)

// lockFile takes the store's exclusive lock as bbolt does (flock, polled
// until timeout), so that verify reads a file no other process writes;
// bbolt's own flock on the same descriptor then finds it held already.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case err != syscall.EWOULDBLOCK:
			return err
		case time.Now().After(deadline):
			return bolterr.ErrTimeout
		}
		time.Sleep(50 * time.Millisecond)
	}
}
