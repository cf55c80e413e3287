package spill

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzOpen: whatever the path, Open either returns a file under
// <dataDir>/scratch (here the one spill file) or an error wrapping
// ErrNotFound; never the file beside the data directory.
func FuzzOpen(f *testing.F) {
	parent := f.TempDir()
	data := filepath.Join(parent, "data")
	st, err := New(data, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	file, err := st.Write("s", "out", []byte("inside\n"))
	if err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "outside"), []byte("outside\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	os.Symlink(filepath.Join(parent, "outside"), filepath.Join(data, "scratch", "s", "link"))
	rel, _ := filepath.Rel(data, file)
	for _, seed := range []string{file, rel, "../outside", "scratch/s/link", "scratch/../../outside", "/", "", ".",
		"scratch/s/tool-output/../../../../outside", filepath.Join(data, "..", "outside"), "scratch//s/./tool-output"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		fh, _, err := st.Open(path)
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("Open(%q): %v, not ErrNotFound", path, err)
			}
			return
		}
		defer fh.Close()
		b, _ := io.ReadAll(fh)
		if !strings.HasPrefix(fh.Name(), filepath.Join(data, "scratch")+string(filepath.Separator)) || string(b) == "outside\n" {
			t.Fatalf("Open(%q) = %s holding %q", path, fh.Name(), b)
		}
	})
}

// FuzzWriteStream: the file never exceeds the cap, holds a prefix of the
// head and a suffix of the tail, and its extent adds up to the file.
func FuzzWriteStream(f *testing.F) {
	st, err := New(f.TempDir(), Options{MaxBytes: 64})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	f.Add([]byte("1\n2\n3\n"), []byte("8\n9\n"), int64(100))
	f.Add([]byte(strings.Repeat("a", 100)), []byte(nil), int64(0))
	f.Add([]byte(nil), []byte(strings.Repeat("z\n", 50)), int64(1000))
	f.Fuzz(func(t *testing.T, head, tail []byte, total int64) {
		p, err := st.WriteStream("s", "out", Stream{Head: head, Tail: tail, TotalBytes: total})
		if err != nil {
			t.Fatal(err)
		}
		fh, ext, err := st.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(fh)
		fh.Close()
		os.Remove(p)
		os.Remove(p + metaSuffix)
		if len(b) > 64 || ext.HeadBytes+ext.TailBytes != int64(len(b)) || ext.StreamBytes < int64(len(head)+len(tail)) {
			t.Fatalf("file %d bytes, extent %+v", len(b), ext)
		}
		whole := append(append([]byte{}, head...), tail...)
		if !ext.Partial() {
			if !bytes.Equal(b, whole) {
				t.Fatalf("whole file %q, want %q", b, whole)
			}
			return
		}
		h, tl := b[:ext.HeadBytes], b[ext.HeadBytes:]
		if len(head) > 0 && !bytes.HasPrefix(head, h) || len(head) == 0 && !bytes.HasSuffix(tail, b) ||
			len(head) > 0 && !bytes.HasSuffix(tail, tl) {
			t.Fatalf("file %q is not a head prefix and a tail suffix of %q / %q (extent %+v)", b, head, tail, ext)
		}
	})
}
