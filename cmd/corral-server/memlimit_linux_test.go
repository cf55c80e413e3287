package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLeastUp: the least limit of a cgroup and its ancestors, "max" and
// v1's unlimited value meaning none.
func TestLeastUp(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	leaf := filepath.Join(root, "a", "b", "c")
	os.MkdirAll(leaf, 0o755)
	write := func(dir, v string) {
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := leastUp(leaf, root, "memory.max"); n != 0 {
		t.Fatalf("no files: %d", n)
	}
	write(leaf, "max")
	write(filepath.Join(root, "a", "b"), "9223372036854771712")
	if n := leastUp(leaf, root, "memory.max"); n != 0 {
		t.Fatalf("unlimited: %d", n)
	}
	write(filepath.Join(root, "a"), "536870912")
	write(root, "1073741824")
	if n := leastUp(leaf, root, "memory.max"); n != 536870912 {
		t.Fatalf("a parent's 512 MiB: %d", n)
	}
	write(leaf, "268435456")
	if n := leastUp(leaf, root, "memory.max"); n != 268435456 {
		t.Fatalf("the leaf's 256 MiB: %d", n)
	}
}
