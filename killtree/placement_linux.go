package killtree

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Where containments are made. In every hierarchy, a containment is a leaf
// <own>/<CgroupParent>/<instance>/<n>, where <own> is the cgroup this
// process was in, in that hierarchy, when it first looked (findMounts). A
// corral started inside a container, a systemd service or another corral's
// command thus makes its leaves beneath the cgroup it was given: the outer
// cgroup.kill or freezer reaches the inner trees, and the outer limits
// (pids.max, memory) bound them. A CgroupParent that begins with "/" opts
// out: it is taken from each hierarchy's root, as before nesting.
//
// The stale sweep looks only at the instances beneath the same place, so a
// corral never sweeps what a corral outside its own cgroup made, and an
// outer corral reaches an inner one's leaves through its own leaf, not
// through the sweep.

// supervisorLeaf is the name of the leaf this process moves itself into, in
// its first instance directory, when cgroup v2 controllers must be enabled
// in the cgroup it lives in (see leaveHome).
const supervisorLeaf = "supervisor"

// ownCgroups maps the mount point of each hierarchy in m to the cgroup
// path ("/..."), relative to that hierarchy's root, that text (a
// /proc/<pid>/cgroup file) names. A hierarchy the text does not name maps
// to "/".
func ownCgroups(m *mounts, text string) map[string]string {
	out := map[string]string{}
	v1 := parseCgroupFile(text)
	for ctrl, root := range m.v1 {
		if p, ok := v1[ctrl]; ok {
			out[root] = p
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && m.v2 != "" {
			out[m.v2] = p
		}
	}
	for _, root := range append(m.roots(), m.v2) {
		if root != "" && out[root] == "" {
			out[root] = "/"
		}
	}
	return out
}

// readOwnCgroups reads the calling process's cgroups on a locked thread:
// /proc/self/cgroup names the main thread's, which a start may have moved
// into a v1 leaf for a moment (the thread trick); a thread the calling
// goroutine holds locked never is.
func readOwnCgroups(m *mounts) map[string]string {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return ownCgroups(m, readFileOr("/proc/thread-self/cgroup"))
}

// place returns where rel ("<CgroupParent>[/<instance>[/<n>]]") lives in
// the hierarchy mounted at root: beneath this process's own cgroup there,
// or beneath the root when rel is absolute.
func (m *mounts) place(root, rel string) string {
	if strings.HasPrefix(rel, "/") {
		return filepath.Join(root, rel)
	}
	return filepath.Join(root, m.own[root], rel)
}

// cgroupPath is place as a path relative to the hierarchy's root, the way
// /proc/<pid>/cgroup names it.
func (m *mounts) cgroupPath(root, rel string) string {
	if strings.HasPrefix(rel, "/") {
		return path.Clean(rel)
	}
	return path.Join("/", m.own[root], rel)
}

// nested reports whether the leaves of rel are made beneath a cgroup other
// than the root of the hierarchy mounted at root.
func (m *mounts) nested(root, rel string) bool {
	return !strings.HasPrefix(rel, "/") && m.own[root] != "/"
}

// placeNote says where the leaves of parent go in the hierarchy at root,
// for doctor.
func (m *mounts) placeNote(root, parent string) string {
	s := "leaves under " + m.place(root, parent)
	if m.nested(root, parent) {
		s += " (nested in this process's cgroup " + m.own[root] + ")"
	}
	return s
}

// busyCgroup2 reports why the v2 controllers listed in the cgroup this
// process lives in cannot be used for its leaves, or "": cgroup v2 lets a
// non-root cgroup that holds processes enable no controller for its
// children (the "no internal processes" rule, cgroup-v2.rst). When this
// process is alone in it, it can move into a leaf of its own (leaveHome)
// and the controllers are usable; when other processes share it, corral
// does not move them, and its leaves get no v2 controller.
func (m *mounts) busyCgroup2(home string) string {
	if m.own[m.v2] == "/" {
		return "" // the root is exempt
	}
	pids, err := readPids(filepath.Join(home, "cgroup.procs"))
	if err != nil {
		return err.Error()
	}
	for _, p := range pids {
		if p != os.Getpid() && !ownWatchdog(p) {
			return fmt.Sprintf("this process's cgroup %s also holds other processes (%d): cgroup v2 enables no controller below a cgroup that holds processes", m.own[m.v2], p)
		}
	}
	return ""
}

// ownWatchdog reports whether pid is a watchdog this process started: it
// starts in this process's cgroup and moves with it (leaveHome).
func ownWatchdog(pid int) bool {
	v, ok := ownChildren.Load(pid)
	_, wd := v.(struct{})
	return ok && wd
}

var (
	leaveMu   sync.Mutex
	leftHome  string // the supervisor leaf this process moved into; guarded by leaveMu
	leaveOnce error  // the first move's error; guarded by leaveMu
)

// leaveHome moves this process (every thread: a v2 cgroup.procs write
// moves the whole thread group) out of home, its own v2 cgroup, into the
// leaf <instDir>/supervisor, so that home holds no process and can enable
// controllers for the leaves beneath it (systemd's delegation pattern). It
// refuses when home holds any other process: corral moves only itself and
// its watchdogs (started before the first containment, so in home). It
// moves once per process; later calls return the first one's outcome. The
// leaf stays until the process exits; the stale sweep removes it with the
// instance directory, and never kills what it holds.
func leaveHome(home, instDir string) (string, error) {
	leaveMu.Lock()
	defer leaveMu.Unlock()
	if leftHome != "" || leaveOnce != nil {
		return leftHome, leaveOnce
	}
	pids, err := readPids(filepath.Join(home, "cgroup.procs"))
	var watchdogs []int
	if err == nil {
		for _, p := range pids {
			switch {
			case p == os.Getpid():
			case ownWatchdog(p):
				watchdogs = append(watchdogs, p)
			default:
				err = fmt.Errorf("killtree: %s holds process %d besides this one: cannot leave it empty for the cgroup v2 controllers: %w", home, p, ErrUnavailable)
			}
			if err != nil {
				break
			}
		}
	}
	if err == nil {
		dir := filepath.Join(instDir, supervisorLeaf)
		if _, err = mkLeaf(dir); err == nil || errors.Is(err, os.ErrExist) {
			err = writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(os.Getpid()))
		}
		for _, p := range watchdogs {
			if err == nil {
				err = writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(p))
			}
		}
		if err == nil {
			leftHome = dir
		}
	}
	leaveOnce = err
	return leftHome, err
}

// isBusy reports whether err is the kernel's refusal to enable a controller
// in a cgroup that holds processes.
func isBusy(err error) bool { return errors.Is(err, unix.EBUSY) }
