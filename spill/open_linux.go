package spill

import (
	"errors"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2(2) turned out to be missing (ENOSYS: Linux
// before 5.6).
var noOpenat2 atomic.Bool

// openBeneath opens rel beneath dirfd with openat2(2) and
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS: the kernel
// refuses any component that is a symlink or leads out of dirfd. Where
// openat2 is missing (ENOSYS), or refused by a seccomp filter that does not
// know it (EPERM: Docker's default profile before 20.10, moby/moby#41076)
// or by an old kernel's flag check (EINVAL, E2BIG), it falls back to the
// component-by-component walk, which promises the same.
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		for range 16 {
			fd, err := unix.Openat2(dirfd, rel, &how)
			switch {
			case err == nil:
				return fd, nil
			case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
				// EAGAIN: a concurrent rename; openat2(2) says to retry.
				continue
			case errors.Is(err, unix.ENOSYS):
				noOpenat2.Store(true)
			case errors.Is(err, unix.EPERM), errors.Is(err, unix.EINVAL), errors.Is(err, unix.E2BIG):
			default:
				return -1, err
			}
			break
		}
	}
	return walkBeneath(dirfd, rel, flags)
}
