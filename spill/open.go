package spill

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Open opens the spill file at path for reading back and returns it with
// what it holds of its stream (the zero Extent when that was not recorded).
// path is absolute (under the data directory as New was given it, or as
// its symlinks resolved then) or relative to the data directory, and must
// name a file under <dataDir>/scratch. The file is opened beneath the data
// directory's descriptor held since New, component by component, never
// following a symlink and never leaving the directory; it is opened
// without blocking (a FIFO cannot hold the caller) and only a regular file
// is returned, in blocking mode, named by the cleaned absolute path.
//
// Every refusal wraps ErrNotFound and says why: an empty path, one outside
// the data directory or beside scratch, a missing file, a symlink on the
// way, something that is not a regular file (a FIFO, a directory, a
// device). A path outside is refused by its spelling, before any file
// system call, so the answer says nothing about the outside. The caller
// closes the file. Open is safe for concurrent use.
func (s *Store) Open(path string) (*os.File, Extent, error) {
	rel, err := s.rel(path)
	if err != nil {
		return nil, Extent{}, err
	}
	f, err := s.openFile(rel)
	if err != nil {
		return nil, Extent{}, &OpenError{Path: path, Reason: openReason(err)}
	}
	return f, s.readExtent(rel), nil
}

// OpenError is Open's refusal: Path (as the caller gave it) and why. It
// matches ErrNotFound.
type OpenError struct {
	Path   string
	Reason string
}

func (e *OpenError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%v: %s", ErrNotFound, e.Reason)
	}
	return fmt.Sprintf("%v: %q: %s", ErrNotFound, e.Path, e.Reason)
}

// Unwrap returns ErrNotFound.
func (e *OpenError) Unwrap() error { return ErrNotFound }

// rel returns path relative to the data directory, cleaned, provided it
// lies under <dataDir>/scratch.
func (s *Store) rel(path string) (string, error) {
	if path == "" {
		return "", &OpenError{Reason: "empty path"}
	}
	if strings.IndexByte(path, 0) >= 0 {
		return "", &OpenError{Path: path, Reason: "the path holds a NUL byte"}
	}
	rel := filepath.Clean(path)
	if filepath.IsAbs(rel) {
		rel = relUnder(s.dataDir, rel)
		if rel == "" {
			rel = relUnder(s.realDir, filepath.Clean(path))
		}
	}
	if rel == "" || !filepath.IsLocal(rel) {
		return "", &OpenError{Path: path, Reason: "outside the data directory"}
	}
	first, rest, _ := strings.Cut(filepath.ToSlash(rel), "/")
	if first != "scratch" || rest == "" {
		return "", &OpenError{Path: path, Reason: "only spill files under " +
			filepath.Join(s.dataDir, "scratch") + " are read"}
	}
	return rel, nil
}

// relUnder returns path relative to root when it lies below root, else "".
func relUnder(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil || !filepath.IsLocal(r) {
		return ""
	}
	return r
}

// notRegularError reports an open that found something other than a
// regular file.
type notRegularError struct{ kind string }

func (e *notRegularError) Error() string { return "is a " + e.kind + ", not a regular file" }

// kindOf names the file type of mode for an error message.
func kindOf(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "FIFO"
	case mode.IsDir():
		return "directory"
	case mode&fs.ModeSymlink != 0:
		return "symlink"
	case mode&fs.ModeSocket != 0:
		return "socket"
	case mode&fs.ModeCharDevice != 0:
		return "character device"
	case mode&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// openReason says in words why openFile failed.
func openReason(err error) string {
	var nr *notRegularError
	switch {
	case errors.As(err, &nr):
		return nr.Error()
	case isSymlinkErr(err):
		return "a symlink on the path (symlinks are not followed)"
	case errors.Is(err, fs.ErrNotExist) || isNotDirErr(err):
		return "no such file"
	case errors.Is(err, fs.ErrClosed):
		return "the spill store is closed"
	}
	return err.Error()
}
