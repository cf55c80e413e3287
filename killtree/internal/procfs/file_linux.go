package procfs

import (
	"errors"
	"io/fs"
	"sync"

	"golang.org/x/sys/unix"
)

// The kernel files killtree reads and writes (procfs, cgroupfs) are small
// and never block, so they go through raw system calls: open, read or write,
// close. os.File would add an fstat, a failed netpoller registration and a
// finaliser to every one of them, and the hot path (a scan after every
// command) opens a dozen.

// ReadFile returns the whole content of path, read into buf (grown when
// the file is larger). Errors are *fs.PathError, so errors.Is(err,
// fs.ErrNotExist) works as with os.ReadFile.
func ReadFile(path string, buf []byte) ([]byte, error) {
	fd, err := OpenFD(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readToEnd(path, buf, func(b []byte, _ int64) (int, error) { return unix.Read(fd, b) })
}

// readToEnd reads with read (given the offset reached so far) into buf,
// grown as needed, until a zero-length read. Errors are *fs.PathError.
func readToEnd(path string, buf []byte, read func(b []byte, off int64) (int, error)) ([]byte, error) {
	if len(buf) == 0 {
		buf = make([]byte, 512)
	}
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		m, err := read(buf[n:], int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
	}
}

// ReadOnce does a single read of path into buf: enough for files the
// kernel renders in one go and that fit, like /proc/<pid>/stat.
func ReadOnce(path string, buf []byte) ([]byte, error) {
	fd, err := OpenFD(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		return buf[:n], nil
	}
}

// WriteFile writes s to an existing kernel file in one write.
func WriteFile(path, s string) error {
	fd, err := OpenFD(path, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		_, err := unix.Write(fd, []byte(s))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "write", Path: path, Err: err}
		}
		return nil
	}
}

// OpenFD opens path with mode, close-on-exec, retrying on EINTR; the
// caller closes the descriptor. Errors are *fs.PathError.
func OpenFD(path string, mode int) (int, error) {
	for {
		fd, err := unix.Open(path, mode|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// File is a kernel file kept open, to be re-read with pread from offset 0
// or re-written, without an open, a close and a path walk every time (a
// procfs or cgroupfs open is most of what reading such a file costs:
// BenchmarkChildrenRead). Its methods are safe for concurrent use; after
// Close they fail with fs.ErrClosed instead of touching a descriptor number
// the process may have reused.
type File struct {
	path string
	mu   sync.RWMutex // held for reading by every use, for writing by close
	fd   int          // -1 once closed; guarded by mu
}

// Open opens path (unix.O_RDONLY or O_WRONLY) for keeps, close-on-exec.
func Open(path string, mode int) (*File, error) {
	fd, err := OpenFD(path, mode)
	if err != nil {
		return nil, err
	}
	return &File{path: path, fd: fd}, nil
}

// Path returns the path the file was opened at.
func (k *File) Path() string { return k.path }

// ReadAll returns the whole file, read into buf (grown as needed): pread from
// offset 0 to a zero-length read. A seq_file restarts at offset 0, and a
// single read stops short where its page-sized buffer ends, so a short read
// is not the end.
func (k *File) ReadAll(buf []byte) ([]byte, error) {
	if k == nil {
		return nil, &fs.PathError{Op: "read", Err: fs.ErrClosed}
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.fd < 0 {
		return nil, &fs.PathError{Op: "read", Path: k.path, Err: fs.ErrClosed}
	}
	return readToEnd(k.path, buf, func(b []byte, off int64) (int, error) { return unix.Pread(k.fd, b, off) })
}

// Write writes s in one write.
func (k *File) Write(s string) error {
	if k == nil {
		return &fs.PathError{Op: "write", Err: fs.ErrClosed}
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.fd < 0 {
		return &fs.PathError{Op: "write", Path: k.path, Err: fs.ErrClosed}
	}
	for {
		_, err := unix.Write(k.fd, []byte(s))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "write", Path: k.path, Err: err}
		}
		return nil
	}
}

// Close closes the file; idempotent. On a nil *File every method fails
// with fs.ErrClosed but Close, which does nothing.
func (k *File) Close() error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fd < 0 {
		return nil
	}
	err := unix.Close(k.fd)
	k.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: k.path, Err: err}
	}
	return nil
}
