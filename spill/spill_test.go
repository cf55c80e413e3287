package spill

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixedNow returns a clock stuck at t.
func fixedNow(t time.Time) func() time.Time { return func() time.Time { return t } }

// mode returns the permission bits of path, failing the test if it is absent.
func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// listTree returns every path below root, relative and slash-separated.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWriteLayoutAndModes(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data") // does not exist yet
	now := time.UnixMilli(1700000000123)
	s := newStore(t, data, Options{Now: fixedNow(now)})

	if _, err := os.Stat(filepath.Join(data, "scratch")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("scratch exists before the first spill: %v", err)
	}
	path, err := s.Write("sess-1", "stdout", []byte("hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(path) {
		t.Errorf("path %q is not absolute", path)
	}
	dir := filepath.Join(data, "scratch", "sess-1", "tool-output")
	if got := filepath.Dir(path); got != dir {
		t.Errorf("dir = %q, want %q", got, dir)
	}
	re := regexp.MustCompile(`^stdout-1700000000123-([0-9]+)\.log$`)
	if !re.MatchString(filepath.Base(path)) {
		t.Errorf("name %q does not match %s", filepath.Base(path), re)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "hello\n" {
		t.Errorf("content = %q, %v; want %q", got, err, "hello\n")
	}
	if runtime.GOOS == "windows" {
		return // Unix permission bits only
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("file mode = %o, want 600", m)
	}
	for _, d := range []string{data, filepath.Join(data, "scratch"), filepath.Join(data, "scratch", "sess-1"), dir} {
		if m := mode(t, d); m != 0o700 {
			t.Errorf("%s mode = %o, want 700", d, m)
		}
	}
}

func TestDirNotCreatedUntilFirstSpill(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s := newStore(t, data, Options{})
	// Everything short of a successful Write leaves the data dir empty.
	if _, err := s.Sweep(0); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveSession("s"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write("s", "../x", []byte("x")); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("err = %v, want ErrInvalidName", err)
	}
	if _, _, err := s.Open("scratch/s/tool-output/x.log"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if got := listTree(t, data); len(got) != 1 {
		t.Fatalf("data dir holds %q before the first spill", got)
	}
	if _, err := s.Write("s", "stdout", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, "scratch", "s", "tool-output")); err != nil {
		t.Fatal(err)
	}
}

func TestWriteMaxBytes(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("0123456789"), 100_000) // 1,000,000 bytes
	tests := []struct {
		name string
		max  int64
		data []byte
		want int
	}{
		// The default caps at 512 KiB.
		{"default", 0, big, DefaultMaxBytes},
		// A configured cap is honoured exactly.
		{"custom", 1000, big, 1000},
		// Data under the cap is written whole.
		{"under", 1000, big[:999], 999},
		// Data exactly at the cap is written whole.
		{"exact", 1000, big[:1000], 1000},
		// Empty data still makes an (empty) file.
		{"empty", 1000, nil, 0},
		// A negative cap means the default.
		{"negative", -1, big, DefaultMaxBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, t.TempDir(), Options{MaxBytes: tt.max})
			p, err := s.Write("s", "out", tt.data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want || !bytes.Equal(got, tt.data[:tt.want]) {
				t.Errorf("wrote %d bytes, want the first %d", len(got), tt.want)
			}
		})
	}
}

// seqOf returns the seq field of a spill file name.
func seqOf(t *testing.T, path string) uint64 {
	t.Helper()
	base := strings.TrimSuffix(filepath.Base(path), ".log")
	n, err := strconv.ParseUint(base[strings.LastIndexByte(base, '-')+1:], 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

func TestWriteNeverOverwrites(t *testing.T) {
	// Not parallel: it predicts the next seq, which other tests advance.
	data := t.TempDir()
	now := time.UnixMilli(1700000000000)
	s := newStore(t, data, Options{Now: fixedNow(now)})
	first, err := s.Write("s", "out", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	// Plant the next three names Write would choose.
	next := seqOf(t, first) + 1
	dir := filepath.Dir(first)
	var planted []string
	for i := range uint64(3) {
		p := filepath.Join(dir, fmt.Sprintf("out-%d-%d.log", now.UnixMilli(), next+i))
		if err := os.WriteFile(p, []byte("planted"), 0o600); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, p)
	}
	// A symlink with the name after that must not be followed either.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("victim"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, fmt.Sprintf("out-%d-%d.log", now.UnixMilli(), next+3))
	if err := os.Symlink(victim, link); err != nil {
		t.Logf("no symlink (%v); skipping that part", err)
	} else {
		planted = append(planted, link)
	}

	second, err := s.Write("s", "out", []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	if got := seqOf(t, second); got < next+uint64(len(planted)) {
		t.Errorf("second seq = %d, want at least %d", got, next+uint64(len(planted)))
	}
	for _, p := range append([]string{planted[0], planted[1], planted[2]}, victim) {
		got, _ := os.ReadFile(p)
		if want := map[bool]string{true: "victim", false: "planted"}[p == victim]; string(got) != want {
			t.Errorf("%s = %q, want %q (clobbered)", p, got, want)
		}
	}
	if got, _ := os.ReadFile(first); string(got) != "first" {
		t.Errorf("first = %q", got)
	}
	if got, _ := os.ReadFile(second); string(got) != "second" {
		t.Errorf("second = %q", got)
	}
}

func TestSeqIncreasesAcrossStores(t *testing.T) {
	t.Parallel()
	a := newStore(t, t.TempDir(), Options{})
	b := newStore(t, t.TempDir(), Options{})
	pa, err := a.Write("s", "out", nil)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.Write("s", "out", nil)
	if err != nil {
		t.Fatal(err)
	}
	if seqOf(t, pb) <= seqOf(t, pa) {
		t.Errorf("seq %d (second store) not above %d (first store)", seqOf(t, pb), seqOf(t, pa))
	}
}

func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	const n = 100
	// A frozen clock makes every name differ by seq alone.
	s := newStore(t, t.TempDir(), Options{Now: fixedNow(time.UnixMilli(1700000000000))})
	paths := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			payload := bytes.Repeat([]byte(fmt.Sprintf("writer %03d\n", i)), 1000)
			paths[i], errs[i] = s.Write("same", "stdout", payload)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if seen[paths[i]] {
			t.Fatalf("writers collided on %s", paths[i])
		}
		seen[paths[i]] = true
		got, err := os.ReadFile(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.Repeat([]byte(fmt.Sprintf("writer %03d\n", i)), 1000); !bytes.Equal(got, want) {
			t.Errorf("writer %d: file content damaged (%d bytes)", i, len(got))
		}
	}
	entries, err := os.ReadDir(filepath.Dir(paths[0]))
	if err != nil {
		t.Fatal(err)
	}
	logs := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			logs++
		}
	}
	if logs != n || len(entries) != 2*n {
		t.Errorf("%d spill files and %d entries, want %d and %d (each with its sidecar)", logs, len(entries), n, 2*n)
	}
}

func TestWriteIOErrorReturned(t *testing.T) {
	t.Parallel()
	// The data dir is a regular file, so nothing can be created below it.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(file, Options{})
	if err == nil || s != nil {
		t.Fatalf("New = %v, %v; want an error and no Store", s, err)
	}
	if errors.Is(err, ErrInvalidName) {
		t.Errorf("I/O failure reported as ErrInvalidName: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "spill: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
	}{
		{"../x", false},                   // traversal
		{"a/b", false},                    // separator
		{`a\b`, false},                    // Windows separator
		{"", false},                       // empty
		{"a\x00b", false},                 // NUL
		{".", false},                      // current directory
		{"..", false},                     // parent directory
		{strings.Repeat("a", 129), false}, // one past the limit
		{"héllo", false},                  // non-ASCII letter
		{"日本", false},                     // unicode
		{"a b", false},                    // space
		{"/abs", false},                   // absolute
		{"C:x", false},                    // Windows drive
		{"a\nb", false},                   // newline
		{strings.Repeat("a", 128), true},  // at the limit
		{"a", true},                       // shortest
		{"...", true},                     // dots only but not . or ..
		{".hidden", true},                 // leading dot
		{"Az09._-", true},                 // every allowed class
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			t.Parallel()
			err := ValidateName("session", tt.name)
			if tt.ok != (err == nil) {
				t.Fatalf("ValidateName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidName) {
					t.Errorf("error %v does not wrap ErrInvalidName", err)
				}
				if !strings.Contains(err.Error(), "session") || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.name)) {
					t.Errorf("error %q does not name the kind and the value", err)
				}
			}

			// Through Write, as session and as label: rejected names create
			// nothing anywhere; accepted ones land inside the data dir.
			parent := t.TempDir()
			data := filepath.Join(parent, "data")
			s := newStore(t, data, Options{})
			for _, pair := range [][2]string{{tt.name, "out"}, {"s", tt.name}} {
				p, err := s.Write(pair[0], pair[1], []byte("x"))
				if tt.ok != (err == nil) {
					t.Fatalf("Write(%q, %q) = %v, want ok=%v", pair[0], pair[1], err, tt.ok)
				}
				if err != nil && !errors.Is(err, ErrInvalidName) {
					t.Errorf("Write error %v does not wrap ErrInvalidName", err)
				}
				if err == nil && !strings.HasPrefix(p, filepath.Join(data, "scratch")+string(filepath.Separator)) {
					t.Errorf("Write(%q, %q) = %q, outside the scratch dir", pair[0], pair[1], p)
				}
			}
			// New made the data dir itself; nothing else may appear.
			if got := listTree(t, parent); !tt.ok && len(got) != 2 {
				t.Errorf("rejected name created %q", got)
			} else if tt.ok && slicesAny(got, func(p string) bool { return p != "." && !strings.HasPrefix(p, "data") }) {
				t.Errorf("accepted name created something outside the data dir: %q", got)
			}
			if err := s.RemoveSession(tt.name); tt.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalidName) {
				t.Errorf("RemoveSession(%q) = %v, want ok=%v", tt.name, err, tt.ok)
			}
		})
	}
}

// slicesAny reports whether f holds for some element of s.
func slicesAny(s []string, f func(string) bool) bool {
	for _, v := range s {
		if f(v) {
			return true
		}
	}
	return false
}

// FuzzWriteNames checks that no session or label reaches outside the scratch
// directory: each is either rejected with ErrInvalidName or lands one level
// below <dataDir>/scratch/<session>/tool-output.
func FuzzWriteNames(f *testing.F) {
	for _, seed := range [][2]string{
		{"s", "out"}, {"../x", "out"}, {"s", "../../x"}, {"a/b", "c"}, {"", ""},
		{".", ".."}, {"a\x00", "b"}, {"é", "x"}, {strings.Repeat("z", 129), "x"},
	} {
		f.Add(seed[0], seed[1])
	}
	parent := f.TempDir()
	data := filepath.Join(parent, "data")
	s, err := New(data, Options{MaxBytes: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, session, label string) {
		p, err := s.Write(session, label, []byte("xy"))
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Write(%q, %q): %v", session, label, err)
			}
			return
		}
		want := filepath.Join(data, "scratch", session, "tool-output")
		if filepath.Dir(p) != want || !strings.HasPrefix(filepath.Base(p), label+"-") {
			t.Fatalf("Write(%q, %q) = %q, want a file %s-* in %q", session, label, p, label, want)
		}
		if got, _ := os.ReadFile(p); string(got) != "x" {
			t.Fatalf("content %q, want %q", got, "x")
		}
		entries, err := os.ReadDir(parent)
		if err != nil || len(entries) != 1 || entries[0].Name() != "data" {
			t.Fatalf("something was created beside the data dir: %v %v", entries, err)
		}
	})
}

// newStore is New, failing the test on an error and closing the Store at
// its end.
func newStore(t *testing.T, dataDir string, o Options) *Store {
	t.Helper()
	s, err := New(dataDir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
