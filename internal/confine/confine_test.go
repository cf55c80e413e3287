package confine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"", ".", true},                      // the root
		{"/", ".", true},                     // the root
		{dir, ".", true},                     // the root's own path
		{dir + "/a/b", "a/b", true},          // beneath the root's own path
		{"/a/b", "a/b", true},                // a leading slash is the root
		{"a/./b/", "a/b", true},              // cleaned
		{"a/../b", "b", true},                // a .. that stays inside
		{"..", "", false},                    // out
		{"a/../../b", "", false},             // out through a parent
		{dir + "/../x", "", false},           // out from the root's path
		{"a\x00b", "", false},                // a NUL
		{dir + "x/y", dir[1:] + "x/y", true}, // a sibling's name is not the root's
	} {
		got, ok := r.Local(tc.in)
		if got != filepath.FromSlash(tc.want) || ok != tc.ok {
			t.Errorf("Local(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestEscapesAndWrite(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	os.Mkdir(dir, 0o755)
	os.Mkdir(outside, 0o755)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink("/", filepath.Join(dir, "abs"))
	r, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, p := range []string{"out/x", "abs/etc/passwd"} {
		_, err := r.WriteAtomic(p, strings.NewReader("x"), 0o644)
		if !r.Escapes(err) {
			t.Errorf("WriteAtomic(%q): %v, want an escape", p, err)
		}
	}
	if _, err := r.Stat("missing"); r.Escapes(err) {
		t.Errorf("a missing file is called an escape: %v", err)
	}
	if n, err := r.WriteAtomic("a/b/c.txt", strings.NewReader("hello"), 0o600); err != nil || n != 5 {
		t.Fatalf("WriteAtomic: %d %v", n, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "a/b/c.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("written file: %v %v, want mode 0600", fi, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "a/b")); len(ents) != 1 {
		t.Errorf("the temporary file was left: %v", ents)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("something was written outside: %v", ents)
	}
}
