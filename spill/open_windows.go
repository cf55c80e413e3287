package spill

import (
	"errors"
	"os"
	"syscall"
)

// openFile opens rel (relative to the data directory, clean and local)
// through the os.Root held since New, which never leaves the directory,
// and returns it only if it is a regular file. A last component that is a
// symlink (a reparse point) is refused by Lstat first; a symlink in an
// earlier component that stays inside the directory is followed here, as
// os.Root does, unlike on Unix. Windows has no FIFOs in the file system,
// so opening cannot block.
func (s *Store) openFile(rel string) (*os.File, error) {
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &notRegularError{kindOf(fi.Mode())}
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &notRegularError{kindOf(st.Mode())}
		}
		return nil, err
	}
	return f, nil
}

// isSymlinkErr reports an error of following a symlink.
func isSymlinkErr(err error) bool { return errors.Is(err, syscall.ELOOP) }

// isNotDirErr reports a path component that is not a directory.
func isNotDirErr(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
