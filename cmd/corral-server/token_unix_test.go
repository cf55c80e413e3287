//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteToken: the generated token file has mode 0600 and holds the
// token and a newline; a symlink planted where it goes is replaced, and its
// target left alone; a second start replaces the token; what is written
// reads back through readTokenFile.
func TestWriteToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o644)
	path := filepath.Join(dir, "data", tokenFileName)
	os.Mkdir(filepath.Dir(path), 0o700)
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"first-token", "second-token"} {
		if err := writeToken(path, tok); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want a regular file with mode 0600", path, fi.Mode(), err)
		}
		if b, _ := os.ReadFile(path); string(b) != tok+"\n" {
			t.Errorf("token file holds %q, want %q", b, tok+"\n")
		}
		if got, err := readTokenFile(path); got != tok || err != nil {
			t.Errorf("readTokenFile: %q, %v", got, err)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}
