//go:build unix

package spill

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// readFlags open a file to read back: never blocking in open(2) (a FIFO
// without a writer would hold the thread for ever), never following a last
// symlink, never becoming a controlling terminal.
const readFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_NOCTTY | unix.O_CLOEXEC

// openFile opens rel (relative to the data directory, clean and local)
// beneath the held directory descriptor and returns it only if it is a
// regular file, switched back to blocking reads.
func (s *Store) openFile(rel string) (*os.File, error) {
	rc, err := s.dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, oerr := -1, error(nil)
	// Control keeps the descriptor from being closed while it runs.
	if err := rc.Control(func(dirfd uintptr) { fd, oerr = openBeneath(int(dirfd), rel, readFlags) }); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, oerr
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &notRegularError{kindOf(unixMode(uint32(st.Mode)))}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fcntl: %w", err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(s.dataDir, rel)), nil
}

// walkBeneath opens rel beneath dirfd one component at a time with
// O_NOFOLLOW, so no symlink is followed and no component can lead out (rel
// holds no ".."): the fallback where openat2 is missing. flags apply to the
// last component.
func walkBeneath(dirfd int, rel string, flags int) (int, error) {
	parts := strings.Split(rel, "/")
	cur := dirfd
	defer func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}()
	for _, p := range parts[:len(parts)-1] {
		fd, err := openatRetry(cur, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if errors.Is(err, unix.ENOTDIR) {
			// O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR on
			// Linux; say symlink, as openat2 does.
			var st unix.Stat_t
			if unix.Fstatat(cur, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		if err != nil {
			return -1, err
		}
		if cur != dirfd {
			unix.Close(cur)
		}
		cur = fd
	}
	return openatRetry(cur, parts[len(parts)-1], flags|unix.O_NOFOLLOW)
}

// openatRetry is openat(2), retried on EINTR.
func openatRetry(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// unixMode maps a stat(2) mode to the file type bits of fs.FileMode.
func unixMode(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// isSymlinkErr reports the error of an O_NOFOLLOW open, or of a
// RESOLVE_NO_SYMLINKS resolution, that met a symlink: ELOOP on Linux, macOS
// and OpenBSD, EMLINK on FreeBSD and NetBSD (their open(2) pages,
// O_NOFOLLOW).
func isSymlinkErr(err error) bool {
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK)
}

// isNotDirErr reports a path component that is not a directory.
func isNotDirErr(err error) bool { return errors.Is(err, unix.ENOTDIR) }
