package killtree

import (
	"errors"
	"fmt"
	"github.com/corral-sh/corral/killtree/internal/procfs"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// v1leaf is a cgroup v1 directory the child joins through the thread trick.
type v1leaf struct {
	ctrl string // controller whose line in /proc/thread-self/cgroup names the thread's cgroup
	root string // the hierarchy's mount point
	dir  string // the leaf
}

// mkV1Leaf creates the v1 leaf rel of controller ctrl, whose hierarchy is
// mounted at root, where place puts it: beneath this process's own cgroup
// in that hierarchy unless rel is absolute.
func mkV1Leaf(ctrl, root, rel string) (v1leaf, error) {
	dir, err := mkLeaf(findMounts().place(root, rel))
	if err != nil {
		return v1leaf{}, err
	}
	return v1leaf{ctrl: ctrl, root: root, dir: dir}, nil
}

// startInV1 runs start (which forks) with the calling thread moved into the
// v1 leaves. cgroup v1 has no CLONE_INTO_CGROUP, but a child inherits the
// cgroups of the thread that forks it, and os/exec forks on the thread of
// the calling goroutine. So: lock a thread, move it into each leaf (see
// thread), start, and move it back to its original cgroups (from h when it
// knows them). The runtime never clones new threads from a thread locked
// with LockOSThread (it uses its template thread instead), so no runtime
// thread is born in a leaf. If the thread cannot be moved back, the goroutine
// exits still locked and the runtime terminates that thread; the child
// started all the same, so that is no error of start's.
func startInV1(leaves []v1leaf, h *homes, start func() error) error {
	if len(leaves) == 0 {
		return start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		th := lockedThread(leaves, h)
		err := th.join(leaves)
		if err == nil {
			err = start()
		}
		if th.goHome(leaves) != nil {
			errc <- err
			return // still locked: the runtime ends this thread
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// thread is the calling OS thread, locked by its goroutine, which moves
// itself between cgroup v1 leaves. It writes "0" to the tasks files: the
// kernel then moves the writing thread, and for the writer itself skips the
// global threadgroup lock a move by TID takes (cgroup_procs_write_start),
// whose writer side can wait for an RCU grace period.
type thread struct {
	homes *homes            // the homes' open tasks files; nil: use home
	home  map[string]string // v1 controller -> the thread's cgroup when locked; nil when homes knows every leaf's
}

// lockedThread describes the calling thread, which the caller has locked:
// its home cgroups come from h when h knows the controller of every leaf,
// else from /proc/thread-self/cgroup.
func lockedThread(leaves []v1leaf, h *homes) thread {
	for _, l := range leaves {
		if h.tasks(l.ctrl) == nil {
			return thread{home: threadCgroups()}
		}
	}
	return thread{homes: h}
}

// join moves the thread into every leaf.
func (th thread) join(leaves []v1leaf) error {
	for _, l := range leaves {
		if err := writeFile(filepath.Join(l.dir, "tasks"), "0"); err != nil {
			return err
		}
	}
	return nil
}

// goHome moves the thread back to its home cgroup in the hierarchies of
// leaves. A home that no longer takes it (its cgroup was removed since homes
// last looked) is replaced by the hierarchy's root, which always exists and
// limits nothing.
func (th thread) goHome(leaves []v1leaf) error {
	var errs []error
	for _, l := range leaves {
		if th.homes != nil {
			if th.homes.tasks(l.ctrl).Write("0") == nil {
				continue
			}
			errs = append(errs, writeFile(filepath.Join(l.root, "tasks"), "0"))
			continue
		}
		p, ok := th.home[l.ctrl]
		if !ok {
			errs = append(errs, fmt.Errorf("killtree: thread cgroup for %s unknown", l.ctrl))
			continue
		}
		errs = append(errs, writeFile(filepath.Join(l.root, p, "tasks"), "0"))
	}
	return errors.Join(errs...)
}

// homes holds, per v1 controller, the tasks file of the cgroup this
// process's threads live in (their home), open, so that the thread trick
// moves its thread back without reading and parsing
// /proc/thread-self/cgroup first, only a write to a file already open
// (part of the cgroup1 tier's cost in BenchmarkSpawnTrue). refresh reads it
// again whenever a containment is made, which on the cgroup tiers happens in
// the preparer while the previous command runs: a process that an outside
// agent moves to other cgroups is followed from its next containment on, and
// a thread whose cached home was removed meanwhile goes to the hierarchy's
// root (goHome). Safe for concurrent use; a nil *homes knows nothing.
type homes struct {
	under []string // the cgroup paths the containments are placed under (mounts.cgroupPath of Config.CgroupParent): a path under one is a containment, never a home

	mu    sync.Mutex
	path  map[string]string       // controller -> home; guarded by mu
	files map[string]*procfs.File // controller -> home's tasks file; guarded by mu
	old   []*procfs.File          // replaced files, which a start may still be using; guarded by mu
}

// refresh reads the calling thread's v1 cgroups and opens the tasks file of
// every home that changed, for the controllers in roots (controller -> mount
// point).
//
// It locks its goroutine to the thread for the read: /proc/thread-self names
// the thread that opens it, but the content is made when it is read, and an
// unlocked goroutine can move to another thread in between, leaving the
// first one free for a start to lock and move into a leaf (api's TestLoad,
// 200 concurrent commands, once cached leaves as homes that way). A thread the calling
// goroutine holds locked is at home: the trick moves only threads it locked
// itself, and brings them back before it unlocks them. A path under the
// containments' parent is refused all the same.
func (h *homes) refresh(roots map[string]string) {
	if h == nil {
		return
	}
	runtime.LockOSThread()
	cur := threadCgroups()
	runtime.UnlockOSThread()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.path == nil {
		h.path, h.files = map[string]string{}, map[string]*procfs.File{}
	}
	for ctrl, root := range roots {
		p, ok := cur[ctrl]
		if !ok || h.path[ctrl] == p && h.files[ctrl] != nil || h.inParent(p) {
			continue
		}
		f, err := procfs.Open(filepath.Join(root, p, "tasks"), unix.O_WRONLY)
		if err != nil {
			continue // lockedThread reads the thread's cgroups instead
		}
		if old := h.files[ctrl]; old != nil {
			h.old = append(h.old, old)
		}
		h.path[ctrl], h.files[ctrl] = p, f
	}
}

// inParent reports whether cgroup path p lies under the containments'
// parent, where no thread of ours lives but for a start.
func (h *homes) inParent(p string) bool {
	for _, u := range h.under {
		u = "/" + strings.Trim(filepath.ToSlash(u), "/")
		if u != "/" && (p == u || strings.HasPrefix(p, u+"/")) {
			return true
		}
	}
	return false
}

// tasks returns the open tasks file of ctrl's home, or nil.
func (h *homes) tasks(ctrl string) *procfs.File {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.files[ctrl]
}

// close closes every file; the Manager is closed, no start is running.
func (h *homes) close() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, f := range h.files {
		errs = append(errs, f.Close())
	}
	for _, f := range h.old {
		errs = append(errs, f.Close())
	}
	h.files, h.path, h.old = nil, nil, nil
	return errors.Join(errs...)
}

// threadCgroups maps each v1 controller to the calling thread's cgroup path.
func threadCgroups() map[string]string {
	var buf [1024]byte
	b, _ := procfs.ReadFile("/proc/thread-self/cgroup", buf[:])
	return parseCgroupFile(string(b))
}

// parseCgroupFile maps each v1 controller of a /proc/<pid>/cgroup text
// ("ID:controller,...:path" lines) to its path.
func parseCgroupFile(text string) map[string]string {
	out := make(map[string]string, 16)
	for text != "" {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok || ctrls == "" {
			continue
		}
		for ctrls != "" {
			var c string
			c, ctrls, _ = strings.Cut(ctrls, ",")
			out[c] = path
		}
	}
	return out
}
