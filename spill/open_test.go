package spill

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spilled writes one spill file in session s and returns its path.
func spilled(t *testing.T, st *Store, s, content string) string {
	t.Helper()
	p, err := st.Write(s, "out", []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// readAll opens path through st and returns its content, or the error.
func readAll(st *Store, path string) (string, error) {
	f, _, err := st.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

func TestOpen(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	st := newStore(t, data, Options{})
	file := spilled(t, st, "sess", "inside\n")
	realData, err := filepath.EvalSymlinks(data)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(file)
	secret := filepath.Join(parent, "secret.txt") // beside the data dir
	if err := os.WriteFile(secret, []byte("s3cr3t-content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "token"), []byte("s3cr3t-content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sibling := filepath.Join(parent, "data-evil") // a prefix test would pass it
	if err := os.MkdirAll(filepath.Join(sibling, "scratch"), 0o700); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		filepath.Join(dir, "out-file.log"):  secret,                                 // a spill name planted as a symlink out
		filepath.Join(dir, "in-file.log"):   file,                                   // a symlink to a spill file
		filepath.Join(data, "scratch", "l"): "/",                                    // a session dir that is a symlink to /
		filepath.Join(data, "scratch", "r"): filepath.Join(data, "scratch", "sess"), // a session dir that is a symlink inside
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	rel := func(p string) string { r, _ := filepath.Rel(data, p); return r }
	tests := []struct {
		name, path string
		want       string // content; "" means ErrNotFound
		reason     string // in the error
	}{
		{"absolute", file, "inside\n", ""},                                                                       // as Write returned it
		{"relative", rel(file), "inside\n", ""},                                                                  // relative to the data dir
		{"real spelling", filepath.Join(realData, rel(file)), "inside\n", ""},                                    // the data dir's symlinks resolved
		{"unclean", filepath.Join(data, "scratch", ".", "x", "..", rel(file)[len("scratch/"):]), "inside\n", ""}, // cleaned
		{"empty", "", "", "empty path"},                                                                          // nothing
		{"nul", "scratch/sess\x00", "", "NUL"},                                                                   // NUL byte
		{"dot-dot", "../secret.txt", "", "outside"},                                                              // climbs out
		{"deep dot-dot", "scratch/sess/../../../../../../etc/passwd", "", "outside"},                             // climbs far out
		{"absolute elsewhere", secret, "", "outside"},                                                            // another directory
		{"etc passwd", "/etc/passwd", "", "outside"},                                                             // a system file
		{"prefix sibling", filepath.Join(sibling, "scratch", "f"), "", "outside"},                                // shares the prefix
		{"beside scratch", "token", "", "only spill files"},                                                      // the server's token
		{"scratch itself", "scratch", "", "only spill files"},                                                    // not below scratch
		{"symlink spill out", filepath.Join(dir, "out-file.log"), "", "symlink"},                                 // planted symlink
		{"symlink spill in", filepath.Join(dir, "in-file.log"), "", "symlink"},                                   // not followed either
		{"session symlink to root", "scratch/l/etc/passwd", "", "symlink"},                                       // swapped session dir
		{"session symlink inside", filepath.Join("scratch", "r", "tool-output", filepath.Base(file)), "", "symlink"},
		{"directory", dir, "", "directory, not a regular file"},         // not a file
		{"missing", filepath.Join(dir, "nope.log"), "", "no such file"}, // absent
		{"under a file", filepath.Join(file, "x"), "", "no such file"},  // ENOTDIR
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := readAll(st, tt.path)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("Open(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Open(%q) = %q, %v; want ErrNotFound naming %q", tt.path, got, err, tt.reason)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "root:") || got != "" {
				t.Fatalf("error leaks content: %v", err)
			}
		})
	}
}

// TestOpenDataDirSwapped: the data directory renamed away and replaced by
// a symlink to / (or by a look-alike tree) after New: the Store keeps
// reading and writing the original directory, and never reaches the host.
func TestOpenDataDirSwapped(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	st := newStore(t, data, Options{})
	file := spilled(t, st, "sess", "original\n")
	if err := os.Rename(data, filepath.Join(parent, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", data); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(st, file); err != nil || got != "original\n" {
		t.Errorf("spill after the swap = %q, %v; want the original file", got, err)
	}
	for _, p := range []string{filepath.Join(data, "etc", "passwd"), "scratch/../etc/passwd", filepath.Join(data, "scratch", "..", "etc", "passwd")} {
		if got, err := readAll(st, p); !errors.Is(err, ErrNotFound) {
			t.Errorf("Open(%q) after the swap = %q, %v; want ErrNotFound", p, got, err)
		}
	}
	// Writes and removals land in the original directory too.
	p2 := spilled(t, st, "sess2", "second\n")
	if b, err := os.ReadFile(filepath.Join(parent, "moved", "scratch", "sess2", "tool-output", filepath.Base(p2))); err != nil || string(b) != "second\n" {
		t.Errorf("write after the swap: %q, %v; want it in the original directory", b, err)
	}
	if err := st.RemoveSession("sess2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(parent, "moved", "scratch", "sess2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("RemoveSession after the swap left the original session: %v", err)
	}
}

// TestSessionSwappedForSymlink: a session directory (or scratch itself)
// replaced by a symlink leading out: writes fail, removal and sweep remove
// the link at most, and nothing outside is touched.
func TestSessionSwappedForSymlink(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	st := newStore(t, data, Options{})
	outside := filepath.Join(parent, "outside")
	victim := filepath.Join(outside, "victim", "tool-output")
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	spilled(t, st, "victim", "x")
	if err := os.RemoveAll(filepath.Join(data, "scratch")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(data, "scratch")); err != nil {
		t.Fatal(err)
	}
	if p, err := st.Write("victim", "out", []byte("x")); err == nil {
		t.Errorf("Write through a scratch symlinked out = %q, want an error", p)
	}
	if err := st.RemoveSession("victim"); err == nil {
		t.Log("RemoveSession through the link: no error")
	}
	if _, err := st.Sweep(1); err != nil {
		t.Logf("Sweep through the link: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(victim, "keep")); err != nil || string(b) != "keep" {
		t.Fatalf("a file outside the data dir was touched: %q, %v", b, err)
	}
	entries, _ := os.ReadDir(victim)
	if len(entries) != 1 {
		t.Errorf("outside dir holds %d entries, want only keep", len(entries))
	}
}

func TestExtent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		st     Stream
		limit  int64
		file   string
		ext    Extent
		notice string // substring; "" means no notice
	}{
		// A whole stream under the cap: no gap, nothing partial.
		{"whole", Stream{Head: []byte("abc"), TotalBytes: 3}, 10, "abc", Extent{StreamBytes: 3, HeadBytes: 3}, ""},
		// A head the capture cut: the file holds the first bytes.
		{"head cut", Stream{Head: []byte("abcdef"), TotalBytes: 100}, 4, "abcd", Extent{StreamBytes: 100, HeadBytes: 4},
			"this file holds the first 4 of 100 bytes"},
		// A tail over the cap keeps its end.
		{"tail cut", Stream{Tail: []byte("abcdef"), TotalBytes: 6}, 4, "cdef", Extent{StreamBytes: 6, TailBytes: 4},
			"this file holds the last 4 of 6 bytes"},
		// Head and tail over the cap: at most half for the tail, each cut
		// on a line boundary.
		{"head+tail", Stream{Head: []byte("1\n2\n3\n"), Tail: []byte("8\n9\n"), TotalBytes: 18}, 6, "1\n9\n",
			Extent{StreamBytes: 18, HeadBytes: 2, TailBytes: 2, HeadLines: 1, HeadEndsLine: true},
			"the first 2 and the last 2 of 18 bytes of the output; the 14 bytes between them were not kept (the gap follows line 1 "},
		// Both parts fit: the file holds them whole around the gap.
		{"head+tail fits", Stream{Head: []byte("1\n2\n"), Tail: []byte("9\n"), TotalBytes: 18}, 60, "1\n2\n9\n",
			Extent{StreamBytes: 18, HeadBytes: 4, TailBytes: 2, HeadLines: 2, HeadEndsLine: true}, "(the gap follows line 2 of this file)"},
		// A short tail leaves the rest of the cap to the head.
		{"short tail", Stream{Head: []byte("abcdefgh"), Tail: []byte("z"), TotalBytes: 50}, 6, "abcdez",
			Extent{StreamBytes: 50, HeadBytes: 5, TailBytes: 1}, "the gap lies inside line 1"},
		// A TotalBytes below the data counts as the data.
		{"total too small", Stream{Head: []byte("abc")}, 10, "abc", Extent{StreamBytes: 3, HeadBytes: 3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t, t.TempDir(), Options{MaxBytes: tt.limit})
			p, err := st.WriteStream("s", "out", tt.st)
			if err != nil {
				t.Fatal(err)
			}
			f, ext, err := st.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(f)
			f.Close()
			if string(b) != tt.file || ext != tt.ext {
				t.Errorf("file %q extent %+v; want %q %+v", b, ext, tt.file, tt.ext)
			}
			if n := ext.Notice(); tt.notice == "" && n != "" || !strings.Contains(n, tt.notice) {
				t.Errorf("notice %q, want %q", n, tt.notice)
			}
			if ext.Partial() != (tt.notice != "") {
				t.Errorf("partial %v", ext.Partial())
			}
		})
	}
}

// TestExtentSidecarDamaged: a missing, planted or malformed sidecar gives
// the zero (unknown) Extent, never a false claim or an error.
func TestExtentSidecarDamaged(t *testing.T) {
	t.Parallel()
	st := newStore(t, t.TempDir(), Options{})
	for _, side := range []string{"", "{", `{"streamBytes":1,"headBytes":5}`, `{"streamBytes":9,"extra":1}`, "symlink", "dir"} {
		p := spilled(t, st, "s", "abc")
		os.Remove(p + metaSuffix)
		switch side {
		case "":
		case "symlink":
			os.WriteFile(p+".real", []byte(`{"streamBytes":99,"headBytes":3}`), 0o600)
			os.Symlink(p+".real", p+metaSuffix)
		case "dir":
			os.Mkdir(p+metaSuffix, 0o700)
		default:
			os.WriteFile(p+metaSuffix, []byte(side), 0o600)
		}
		f, ext, err := st.Open(p)
		if err != nil {
			t.Fatalf("%q: %v", side, err)
		}
		f.Close()
		if ext != (Extent{}) || ext.Partial() || ext.Notice() != "" {
			t.Errorf("sidecar %q: extent %+v", side, ext)
		}
	}
}
