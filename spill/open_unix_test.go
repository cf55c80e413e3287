//go:build unix

package spill

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenFIFO: a FIFO planted in a session directory (under a spill name,
// with no writer) is refused at once, not waited on.
func TestOpenFIFO(t *testing.T) {
	t.Parallel()
	st := newStore(t, t.TempDir(), Options{})
	file := spilled(t, st, "sess", "x")
	fifo := filepath.Join(filepath.Dir(file), "planted.log")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readAll(st, fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "is a FIFO, not a regular file") {
			t.Fatalf("Open(fifo) = %v; want ErrNotFound naming the FIFO", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the open so the goroutine ends, then fail.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("Open blocked on a FIFO")
	}
	// The sidecar read goes through the same open: a FIFO there is no
	// extent, not a hang.
	os.Remove(file + metaSuffix)
	if err := unix.Mkfifo(file+metaSuffix, 0o600); err != nil {
		t.Fatal(err)
	}
	f, ext, err := st.Open(file)
	if err != nil || ext != (Extent{}) {
		t.Fatalf("Open with a FIFO sidecar = %+v, %v", ext, err)
	}
	f.Close()
}

// TestWalkBeneath runs the fallback walk (what openat2's absence leaves)
// over the cases the kernel's RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS covers.
func TestWalkBeneath(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(data, "a", "b"), 0o700))
	must(os.WriteFile(filepath.Join(data, "a", "b", "f"), []byte("x"), 0o600))
	must(os.Symlink("/", filepath.Join(data, "a", "root")))
	must(os.Symlink("b", filepath.Join(data, "a", "in")))
	must(os.Symlink("f", filepath.Join(data, "a", "b", "lf")))
	must(unix.Mkfifo(filepath.Join(data, "a", "b", "p"), 0o600))
	dir, err := os.Open(data)
	must(err)
	defer dir.Close()
	tests := []struct {
		rel  string
		want error // nil: opens
	}{
		{"a/b/f", nil},                    // a file
		{"a/root/etc/passwd", unix.ELOOP}, // a symlink to /
		{"a/in/f", unix.ELOOP},            // a symlink inside
		{"a/b/lf", unix.ELOOP},            // the last component a symlink
		{"a/b/nope", unix.ENOENT},         // missing
		{"a/b/f/x", unix.ENOTDIR},         // under a file
		{"a/b/p", nil},                    // a FIFO opens without blocking; fstat refuses it later
	}
	for _, tt := range tests {
		fd, err := walkBeneath(int(dir.Fd()), tt.rel, readFlags)
		if fd >= 0 {
			unix.Close(fd)
		}
		if tt.want == nil && err != nil || tt.want != nil && !(errors.Is(err, tt.want) || tt.want == unix.ELOOP && isSymlinkErr(err)) {
			t.Errorf("walkBeneath(%q) = %v, want %v", tt.rel, err, tt.want)
		}
	}
}
