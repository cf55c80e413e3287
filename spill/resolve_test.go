package spill

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	s := New(data, Options{})
	spilled, err := s.Write("sess", "out", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	// The data dir as the resolver sees it (t.TempDir may sit under a symlink).
	realData, err := filepath.EvalSymlinks(data)
	if err != nil {
		t.Fatal(err)
	}
	realSpilled := filepath.Join(realData, "scratch", "sess", "tool-output", filepath.Base(spilled))

	secret := filepath.Join(parent, "secret.txt") // beside the data dir
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A sibling whose name extends the data dir's: a prefix test would pass it.
	sibling := filepath.Join(parent, "data-evil")
	if err := os.MkdirAll(sibling, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sibling, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"out-file": secret,                              // symlink to a file outside
		"out-dir":  parent,                              // symlink to a directory outside
		"in-file":  spilled,                             // symlink to a file inside
		"in-rel":   filepath.Join("scratch", "sess"),    // relative symlink inside
		"dangling": filepath.Join(data, "nothing-here"), // symlink to nothing
	}
	symlinks := true
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(data, name)); err != nil {
			t.Logf("no symlinks (%v): skipping those rows", err)
			symlinks = false
			break
		}
	}

	tests := []struct {
		name    string
		path    string
		want    string // "" means ErrNotFound
		symlink bool
	}{
		{"absolute inside", spilled, realSpilled, false},                                                                                         // the path Write returned
		{"relative inside", filepath.Join("scratch", "sess", "tool-output", filepath.Base(spilled)), realSpilled, false},                         // relative to the data dir
		{"unclean inside", filepath.Join(data, "scratch", ".", "sess", "..", "sess", "tool-output", filepath.Base(spilled)), realSpilled, false}, // cleaned
		{"data dir itself", data, realData, false},                                                                                               // at the root, allowed
		{"traversal relative", filepath.Join("..", "secret.txt"), "", false},                                                                     // climbs out
		{"deep traversal", filepath.Join("scratch", "..", "..", "..", "..", "..", "..", "..", "etc", "passwd"), "", false},                       // climbs far out
		{"absolute elsewhere", secret, "", false},                                                                                                // outside, exists
		{"absolute system", os.Args[0], "", false},                                                                                               // the test binary, elsewhere
		{"prefix sibling", filepath.Join(sibling, "f"), "", false},                                                                               // shares the name prefix
		{"prefix sibling relative", filepath.Join("..", "data-evil", "f"), "", false},                                                            // same, relative
		{"missing", filepath.Join("scratch", "sess", "tool-output", "nope.log"), "", false},                                                      // does not exist
		{"empty", "", "", false},                                                  // no path at all
		{"nul", "scratch\x00", "", false},                                         // NUL byte
		{"symlink to file outside", "out-file", "", true},                         // symlink out
		{"symlink dir outside", filepath.Join("out-dir", "secret.txt"), "", true}, // through a symlinked dir
		{"symlink dir back inside", filepath.Join("out-dir", "data", "scratch"), filepath.Join(realData, "scratch"), true}, // out and back in: the real path is inside
		{"symlink inside", "in-file", realSpilled, true},                                                                   // symlink within
		{"relative symlink inside", filepath.Join("in-rel", "tool-output", filepath.Base(spilled)), realSpilled, true},     // relative symlink within
		{"dangling symlink", "dangling", "", true},                                                                         // target missing
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.symlink && !symlinks {
				t.Skip("symlinks unavailable")
			}
			got, err := s.Resolve(tt.path)
			if tt.want == "" {
				if !errors.Is(err, ErrNotFound) || got != "" {
					t.Fatalf("Resolve(%q) = %q, %v; want ErrNotFound", tt.path, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
		})
	}
}

func TestResolveDataDirMissing(t *testing.T) {
	t.Parallel()
	s := New(filepath.Join(t.TempDir(), "never-written"), Options{})
	if _, err := s.Resolve("scratch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	root := filepath.FromSlash("/d/data")
	tests := []struct {
		path string
		want bool
	}{
		{"/d/data", true},          // the root itself
		{"/d/data/a", true},        // a child
		{"/d/data/..a", true},      // a child whose name starts with two dots
		{"/d/data-x/a", false},     // a sibling sharing the prefix
		{"/d", false},              // the parent
		{"/d/other/data/a", false}, // elsewhere, same tail
		{"/", false},               // the file system root
	}
	for _, tt := range tests {
		if got := within(root, filepath.FromSlash(tt.path)); got != tt.want {
			t.Errorf("within(%q, %q) = %v, want %v", root, tt.path, got, tt.want)
		}
	}
}
