//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openOwnFile opens path for reading if it is a regular file (not a
// symlink: O_NOFOLLOW; not a FIFO that would block: O_NONBLOCK, then fstat)
// that belongs to this process's user and that no one else may read or
// write (no group or other permission bits, as ssh requires of a key).
func openOwnFile(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	// O_NOFOLLOW on a symlink fails with ELOOP (EMLINK on FreeBSD).
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) {
		return nil, fmt.Errorf("%s is a symlink; give the file it points to", path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	mode := uint32(st.Mode)
	switch euid := os.Geteuid(); {
	case mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("%s is not a regular file", path)
	case int(st.Uid) != euid:
		err = fmt.Errorf("%s belongs to uid %d, not to this user (uid %d)", path, st.Uid, euid)
	case mode&0o077 != 0:
		err = fmt.Errorf("%s has mode %04o: others may read or change it; a token file must be its owner's only (chmod 600 %s)",
			path, mode&0o7777, path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
