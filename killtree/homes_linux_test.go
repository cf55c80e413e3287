package killtree

import (
	"fmt"
	"github.com/corral-sh/corral/killtree/internal/procfs"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestHomesRefresh: refresh caches the calling thread's v1 cgroups and an
// open tasks file for each controller the thread trick uses.
func TestHomesRefresh(t *testing.T) {
	mnt := findMounts()
	roots := mnt.trickRoots()
	if len(roots) == 0 {
		t.Skip("no v1 freezer or pids hierarchy here")
	}
	h := &homes{under: []string{"/corral"}}
	defer h.close()
	runtime.LockOSThread() // refresh and the comparison read the same thread
	defer runtime.UnlockOSThread()
	h.refresh(roots)
	cur := threadCgroups()
	for ctrl, root := range roots {
		if h.path[ctrl] != cur[ctrl] {
			t.Errorf("%s: cached home %q, thread is in %q", ctrl, h.path[ctrl], cur[ctrl])
		}
		if f := h.tasks(ctrl); f == nil || f.Path() != filepath.Join(root, cur[ctrl], "tasks") {
			t.Errorf("%s: tasks file %v", ctrl, f)
		}
	}
}

// TestGoHomeFallsBackToRoot: a thread whose cached home no longer takes it
// goes to the hierarchy's root, and the start is not failed for it.
func TestGoHomeFallsBackToRoot(t *testing.T) {
	mnt := findMounts()
	root := mnt.v1["pids"]
	if root == "" {
		t.Skip("no v1 pids hierarchy here")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked if the thread cannot be put back: it then ends
		home := threadCgroups()["pids"]
		leaf, err := mkV1Leaf("pids", root, filepath.Join("corral", instance(), "home-"+newID()))
		if err != nil {
			errc <- err
			return
		}
		gone, err := procfs.Open(filepath.Join(leaf.dir, "tasks"), unix.O_WRONLY)
		if err != nil {
			errc <- err
			return
		}
		gone.Close() // a home that takes no one any more
		h := &homes{path: map[string]string{"pids": "/gone"}, files: map[string]*procfs.File{"pids": gone}}
		th := lockedThread([]v1leaf{leaf}, h)
		if th.homes == nil {
			errc <- errorf("lockedThread ignored the cached home")
			return
		}
		if err := th.join([]v1leaf{leaf}); err != nil {
			errc <- err
			return
		}
		herr := th.goHome([]v1leaf{leaf})
		now := threadCgroups()["pids"]
		// Back to where the thread came from, whatever goHome did.
		if err := writeFile(filepath.Join(root, home, "tasks"), "0"); err != nil {
			errc <- err
			return
		}
		runtime.UnlockOSThread()
		switch {
		case herr != nil:
			errc <- herr
		case now != "/":
			errc <- errorf("thread went to %q, want the root", now)
		default:
			errc <- rmLeaf(leaf.dir)
		}
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the thread trick hung")
	}
}

// TestNoWatcherUntilExited: on Linux a tree runs no goroutine until Exited
// is called; each call then starts one watcher, which Close ends.
func TestNoWatcherUntilExited(t *testing.T) {
	m, err := New(Config{Tier: TierPgroup})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const n = 20
	before := runtime.NumGoroutine()
	var trees []*Tree
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command("sleep", lifetime)
		tr, err := m.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		trees, cmds = append(trees, tr), append(cmds, cmd)
	}
	if got := runtime.NumGoroutine() - before; got >= n {
		t.Errorf("%d trees added %d goroutines before any Exited call", n, got)
	}
	for _, tr := range trees {
		tr.Exited()
	}
	if got := runtime.NumGoroutine() - before; got < n {
		t.Errorf("Exited on %d trees added %d goroutines, want %d watchers", n, got, n)
	}
	for i, tr := range trees {
		if _, err := tr.Kill(); err != nil {
			t.Error(err)
		}
		select {
		case <-tr.Exited():
		case <-time.After(5 * time.Second):
			t.Error("Exited not closed after Kill")
		}
		_ = cmds[i].Wait() // killed
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// TestHomesRefuseContainments: a path under the containments' parent is never
// cached as a home, whatever the thread reads.
func TestHomesRefuseContainments(t *testing.T) {
	h := &homes{under: []string{"/corral"}}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/corral/123-456/7", true},    // a leaf
		{"/corral", true},              // the parent itself
		{"/corral-other/x", false},     // a sibling that only shares the prefix
		{"/", false},                   // the root
		{"/system.slice/x", false},     // a service's cgroup
		{"/a/corral/123-456/7", false}, // another tree's corral, not ours
	} {
		if (&homes{}).inParent(tc.path) {
			t.Errorf("with no parent, inParent(%q) = true", tc.path)
		}
		if got := h.inParent(tc.path); got != tc.want {
			t.Errorf("inParent(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
	// A corral nested in another one's leaf places its containments under
	// that leaf (see place): the leaf is its home, not a containment.
	nested := &homes{under: []string{"/corral/1-2/3/corral"}}
	if nested.inParent("/corral/1-2/3") || !nested.inParent("/corral/1-2/3/corral/4-5/6") {
		t.Error("a nested instance mistakes its home for a containment, or the reverse")
	}
}

// TestHomesUnderConcurrentStarts: with starts in flight on many threads (each
// moved into a leaf for its fork), the homes the preparer and the starts
// refresh are never a leaf, and never change.
func TestHomesUnderConcurrentStarts(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			if !tierWorks(safety.Name(), tier) {
				t.Skipf("%s tier does not work here", tier)
			}
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name()})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			h := m.plat.homes
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 20 {
						cmd := exec.Command(trueBinary())
						tr, err := m.Start(cmd)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = tr.Kill()
						_ = cmd.Wait() // `true`: its status is not under test
						_ = tr.Close()
					}
				}()
			}
			wg.Wait()
			h.mu.Lock()
			defer h.mu.Unlock()
			for ctrl, p := range h.path {
				if h.inParent(p) {
					t.Errorf("%s home cached as %q, a containment", ctrl, p)
				}
			}
			if len(h.old) > 0 {
				t.Errorf("the homes changed %d times while nothing moved the process", len(h.old))
			}
		})
	}
}
