package spill

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenWithoutOpenat2 runs Open as on a kernel without openat2(2): the
// walk must refuse and accept exactly what openat2 does. Not parallel: it
// flips the package's fallback switch, which parallel tests never see
// flipped (they run after it).
func TestOpenWithoutOpenat2(t *testing.T) {
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	st := newStore(t, data, Options{})
	file := spilled(t, st, "sess", "inside\n")
	dir := filepath.Dir(file)
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(data, "scratch", "root")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, want, reason string }{
		{file, "inside\n", ""},                               // a spill file
		{filepath.Join(dir, "link.log"), "", "symlink"},      // a planted symlink
		{"scratch/root/etc/passwd", "", "symlink"},           // a session dir swapped for a symlink to /
		{filepath.Join(dir, "fifo.log"), "", "is a FIFO"},    // a FIFO
		{filepath.Join(dir, "gone.log"), "", "no such file"}, // missing
	}
	for _, openat2 := range []bool{true, false} {
		noOpenat2.Store(!openat2)
		for _, tt := range tests {
			got, err := readAll(st, tt.path)
			if tt.want != "" && (err != nil || got != tt.want) ||
				tt.want == "" && (!errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tt.reason)) {
				t.Errorf("openat2=%v: Open(%q) = %q, %v; want %q / %q", openat2, tt.path, got, err, tt.want, tt.reason)
			}
		}
	}
	noOpenat2.Store(false)
}
