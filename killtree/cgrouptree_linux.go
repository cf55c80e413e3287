package killtree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-sh/corral/killtree/internal/procfs"

	"golang.org/x/sys/unix"
)

// A command running as root can make cgroups inside its own leaf, move its
// processes there and freeze them (v1 freezer.state, v2 cgroup.freeze), or
// move them into a frozen cgroup elsewhere. This file holds what the way
// down does about it: it lists a leaf's processes with those of its nested
// cgroups, thaws what the tree froze, and removes a leaf children first.

// subCgroups lists the cgroups nested in dir, parents before their children.
// A cgroup removed meanwhile is simply not listed. The common leaf has none,
// and costs one stat: kernfs gives a directory 2 + its subdirectories as
// link count (fs/kernfs/inode.c, kernfs_refresh_inode), so the directory is
// read only when it has some.
func subCgroups(dir string) []string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil || st.Nlink <= 2 {
		return nil
	}
	var out []string
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if e.IsDir() {
			sub := filepath.Join(dir, e.Name())
			out = append(out, sub)
			out = append(out, subCgroups(sub)...)
		}
	}
	return out
}

// readPidsTree lists the processes of dir and of every cgroup nested in it
// (cgroup.procs lists only a cgroup's own processes, in v1 and v2 alike).
func readPidsTree(dir string) ([]int, error) {
	pids, err := readPids(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	for _, sub := range subCgroups(dir) {
		p, err := readPids(filepath.Join(sub, "cgroup.procs"))
		if err != nil {
			continue // removed meanwhile: its processes left with it
		}
		pids = append(pids, p...)
	}
	return pids, nil
}

// thawNested thaws every cgroup nested in dir that froze itself: in v1 a
// child with freezer.state FROZEN stays frozen when its parent is thawed
// (freezer.self_freezing, Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst),
// and a frozen v1 task does not act on SIGKILL until thawed. In v2 a frozen
// task does die of SIGKILL (cgroup-v2.rst, "Core Interface Files",
// cgroup.freeze), but not of the SIGTERM the graceful phase sends, so v2
// children are thawed too.
func thawNested(dir string) {
	for _, sub := range subCgroups(dir) {
		thawOne(sub)
	}
}

// thawOne thaws cgroup dir if it froze itself (v1 freezer or v2
// cgroup.freeze); other cgroups are left alone. Best effort: a cgroup
// removed meanwhile has nothing left to thaw.
func thawOne(dir string) bool {
	if strings.TrimSpace(readFileOr(filepath.Join(dir, "freezer.self_freezing"))) == "1" {
		return writeFile(filepath.Join(dir, "freezer.state"), "THAWED") == nil
	}
	if strings.TrimSpace(readFileOr(filepath.Join(dir, "cgroup.freeze"))) == "1" {
		return writeFile(filepath.Join(dir, "cgroup.freeze"), "0") == nil
	}
	return false
}

// frozenHolders returns the cgroups (v1 freezer, v2) that froze themselves
// and hold pid, directly or as an ancestor of its cgroup: thawing them is
// what lets pid act on its SIGKILL. Cgroup roots cannot be frozen.
func frozenHolders(mnt *mounts, pid int) []string {
	text, err := procfs.Cgroups(pid)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(text, "\n") {
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, path, _ := strings.Cut(rest, ":")
		var root, file, frozen string
		switch {
		case ctrls == "" && mnt.v2 != "":
			root, file, frozen = mnt.v2, "cgroup.freeze", "1"
		case hasCtrl(ctrls, "freezer") && mnt.v1["freezer"] != "":
			root, file, frozen = mnt.v1["freezer"], "freezer.self_freezing", "1"
		default:
			continue
		}
		for p := filepath.Clean(path); p != "/" && p != "." && p != ""; p = filepath.Dir(p) {
			dir := filepath.Join(root, p)
			if strings.TrimSpace(readFileOr(filepath.Join(dir, file))) == frozen {
				out = append(out, dir)
			}
		}
	}
	return out
}

func hasCtrl(ctrls, c string) bool {
	for _, x := range strings.Split(ctrls, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// rmTree removes cgroup dir and the cgroups nested in it, children first.
// A nested cgroup that still holds processes (a root command made it and
// its processes left the leaf's kill) has them thawed and SIGKILLed before
// its removal is tried. A missing dir is fine.
func rmTree(dir string) error {
	subs := subCgroups(dir)
	for i := len(subs) - 1; i >= 0; i-- {
		killCgroup(subs[i])
	}
	var errs []error
	for i := len(subs) - 1; i >= 0; i-- {
		errs = append(errs, rmLeaf(subs[i]))
	}
	return errors.Join(append(errs, rmLeaf(dir))...)
}

// killCgroup SIGKILLs the processes of one cgroup and thaws it if it froze
// itself, waiting up to a second for them to leave: what a removal needs of
// a nested cgroup nobody else kills.
func killCgroup(dir string) {
	procs := filepath.Join(dir, "cgroup.procs")
	pids, _ := readPids(procs)
	if len(pids) == 0 {
		return
	}
	_ = pollUntilTimeout(time.Second, func() bool {
		pids, _ := readPids(procs)
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL) // ESRCH: gone meanwhile
		}
		thawOne(dir) // after the signal: a thawed task dies before it runs
		return len(pids) == 0
	})
}
