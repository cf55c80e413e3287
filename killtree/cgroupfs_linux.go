package killtree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-sh/corral/killtree/internal/procfs"

	"golang.org/x/sys/unix"
)

// mounts lists the cgroup hierarchies of this machine.
type mounts struct {
	v2     string            // cgroup2 mount point, "" if none
	v2ctrl map[string]bool   // controllers the leaves can use: listed in the cgroup.controllers of this process's v2 cgroup, unless v2busy
	v2busy string            // why the controllers listed there cannot be used (busyCgroup2), or ""
	v1     map[string]string // v1 controller ("pids", "freezer", ...) -> mount point
	own    map[string]string // mount point -> this process's cgroup in that hierarchy when findMounts ran (see place)
}

var (
	mountsOnce sync.Once
	mountsVal  *mounts
)

// findMounts parses /proc/self/mountinfo and this process's cgroups once:
// the leaves are made beneath those cgroups for the life of the process
// (see place), wherever an outside agent moves it later.
func findMounts() *mounts {
	mountsOnce.Do(func() {
		m := parseMountinfo(readFileOr("/proc/self/mountinfo"))
		m.own = readOwnCgroups(m)
		if m.v2 != "" {
			home := filepath.Join(m.v2, m.own[m.v2])
			ctrls := strings.Fields(readFileOr(filepath.Join(home, "cgroup.controllers")))
			if len(ctrls) > 0 {
				m.v2busy = m.busyCgroup2(home)
			}
			for _, c := range ctrls {
				m.v2ctrl[c] = m.v2busy == ""
			}
		}
		mountsVal = m
	})
	return mountsVal
}

// parseMountinfo picks the cgroup mounts out of /proc/self/mountinfo text.
func parseMountinfo(text string) *mounts {
	m := &mounts{v2ctrl: map[string]bool{}}
	m.v2, m.v1 = procfs.CgroupMounts(text)
	return m
}

// instanceDirs lists this instance's directory in every hierarchy we use.
func (m *mounts) instanceDirs(parent, inst string) []string {
	var out []string
	for _, root := range m.roots() {
		out = append(out, m.place(root, filepath.Join(parent, inst)))
	}
	return out
}

// roots lists the hierarchies killtree makes leaves in.
func (m *mounts) roots() []string {
	var out []string
	if m.v2 != "" {
		out = append(out, m.v2)
	}
	for _, c := range v1Controllers { // pids last: its leaves die with the others
		if r := m.v1[c]; r != "" && !slices.Contains(out, r) { // co-mounted: one root
			out = append(out, r)
		}
	}
	return out
}

// v1Controllers are the v1 hierarchies killtree may make leaves in: freezer
// (the cgroup1 tier), memory, cpu and cpuacct (limits and accounting, see
// cgLimits), pids (the fork limit).
var v1Controllers = []string{"freezer", "memory", "cpu", "cpuacct", "pids"}

// trickRoots maps the v1 controllers whose leaves a start may join through
// the thread trick to their mount points.
func (m *mounts) trickRoots() map[string]string {
	out := map[string]string{}
	for _, c := range v1Controllers {
		if r := m.v1[c]; r != "" {
			out[c] = r
		}
	}
	return out
}

func readFileOr(path string) string {
	b, _ := procfs.ReadFile(path, nil)
	return string(b)
}

// writeFile writes s to an existing cgroup file.
func writeFile(path, s string) error {
	if err := procfs.WriteFile(path, s); err != nil {
		return fmt.Errorf("killtree: %w", err)
	}
	return nil
}

// readPids parses a cgroup.procs or tasks file.
func readPids(path string) ([]int, error) {
	b, err := procfs.ReadFile(path, nil)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("killtree: %w", err)
	}
	return procfs.ParsePids(b), nil
}

// mkLeaf creates dir (a fresh cgroup) and its missing parents. Another
// Manager of this process may remove the shared instance directory at any
// moment, so a missing parent is recreated and the mkdir retried.
func mkLeaf(dir string) (string, error) {
	var err error
	for range 3 {
		if err = os.Mkdir(dir, 0o755); err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			break
		}
	}
	return "", fmt.Errorf("killtree: %w", err)
}

// rmLeaf removes a cgroup directory; a missing one is fine. A cgroup whose
// last task is exiting can refuse with EBUSY for a moment, so it retries
// briefly, unless a live process holds it (a survivor of the kill), which
// no wait would remove.
func rmLeaf(dir string) error {
	var err error
	for i := range 50 {
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || holdsLive(dir) {
			break
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond) // retry pacing, not synchronisation
	}
	return fmt.Errorf("killtree: rmdir %s: %w", dir, err)
}

// holdsLive reports whether cgroup dir lists a process that is not a
// zombie.
func holdsLive(dir string) bool {
	pids, _ := readPids(filepath.Join(dir, "cgroup.procs"))
	buf := make([]byte, 1024)
	for _, pid := range pids {
		if p, ok := readStat(pid, buf); ok && !p.zombie() {
			return true
		}
	}
	return false
}

// waitPopulated0 waits until cgroup.events reads "populated 0": inotify
// IN_MODIFY on the file (kernfs notifies on every change, as kselftest's
// cg_wait_for relies on), re-reading at least every 100 ms as a fallback, or
// polling with backoff when inotify is unavailable.
func waitPopulated0(ctx context.Context, events string) error {
	if !populated(events) {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return pollUntil(ctx, func() bool { return !populated(events) })
	}
	f := os.NewFile(uintptr(fd), "inotify")
	defer f.Close()
	if _, err := unix.InotifyAddWatch(fd, events, unix.IN_MODIFY); err != nil {
		return pollUntil(ctx, func() bool { return !populated(events) })
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 4096)
	for {
		if !populated(events) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		_ = f.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = f.Read(buf) // an event, the fallback tick, or ctx's deadline: re-check
	}
}

// populated reports whether cgroup.events says "populated 1". A missing file
// (the cgroup is gone) reads as empty.
func populated(events string) bool {
	return strings.Contains(readFileOr(events), "populated 1")
}
