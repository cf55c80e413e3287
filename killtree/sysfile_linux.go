package killtree

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// The kernel files killtree reads and writes (procfs, cgroupfs) are small
// and never block, so they go through raw system calls: open, read or write,
// close. os.File would add an fstat, a failed netpoller registration and a
// finaliser to every one of them, and the hot path (a scan after every
// command) opens a dozen.

// readKernelFile returns the whole content of path, read into buf (grown when
// the file is larger). Errors are *fs.PathError, so errors.Is(err,
// fs.ErrNotExist) works as with os.ReadFile.
func readKernelFile(path string, buf []byte) ([]byte, error) {
	fd, err := openRetry(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if len(buf) == 0 {
		buf = make([]byte, 512)
	}
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		m, err := unix.Read(fd, buf[n:])
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

// readKernelOnce does a single read of path into buf: enough for files the
// kernel renders in one go and that fit, like /proc/<pid>/stat.
func readKernelOnce(path string, buf []byte) ([]byte, error) {
	fd, err := openRetry(path, unix.O_RDONLY)
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

// writeKernelFile writes s to an existing kernel file in one write.
func writeKernelFile(path, s string) error {
	fd, err := openRetry(path, unix.O_WRONLY)
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

func openRetry(path string, mode int) (int, error) {
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
