package killtree

import (
	"strings"

	"github.com/corral-sh/corral/killtree/internal/procfs"
)

// thawFrozen thaws the frozen cgroups (v1 freezer, v2 cgroup.freeze) that
// hold any of pids, members of the tree that outlived a SIGKILL: a task in a
// frozen v1 cgroup does not act on it until thawed. Only what the tree froze
// is thawed: a cgroup inside the tree's containment, or one whose every
// process (nested cgroups included) belongs to the tree. A cgroup that also
// holds other processes (a paused container, say) stays frozen, and the
// member in it survives the kill and is reported.
func (t *Tree) thawFrozen(pids []int) {
	own := t.c.dirs()
	done := map[string]bool{}
	for _, p := range pids {
		for _, dir := range frozenHolders(t.m.plat.mnt, p) {
			if done[dir] {
				continue
			}
			done[dir] = true
			if within(dir, own) || t.holdsOnlyMembers(dir) {
				thawOne(dir)
			}
		}
	}
}

// within reports whether dir is one of roots or nested in one.
func within(dir string, roots []string) bool {
	for _, r := range roots {
		if dir == r || strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}

// holdsOnlyMembers reports whether every process in cgroup dir and the
// cgroups nested in it belongs to the tree: listed by its containment, or
// attributed to it (same PID and start time).
func (t *Tree) holdsOnlyMembers(dir string) bool {
	pids, err := readPidsTree(dir)
	if err != nil || len(pids) == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range pids {
		if t.st.dead[p] {
			continue
		}
		if s, ok := t.st.seen[p]; !ok || s != procStart(p) {
			return false
		}
	}
	return true
}

// containmentSet returns the containment's processes as a set; nil on
// pgroup, which has no list of its own.
func (t *Tree) containmentSet() map[int]bool {
	if t.tier == TierPgroup {
		return nil
	}
	pids, _ := t.c.procs() // an error reads as empty: the member counts as outside
	set := make(map[int]bool, len(pids))
	for _, p := range pids {
		set[p] = true
	}
	return set
}

// countEscapee records pid (with its start time from ps) as an escapee and
// reports whether it was not counted before: one process is one escapee,
// however many passes or scans meet it.
func (t *Tree) countEscapee(pid int, ps []proc) bool {
	var start uint64
	for _, p := range ps {
		if p.pid == pid {
			start = p.start
		}
	}
	if start == 0 {
		start = procStart(pid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.st.escaped[pid]; ok && s == start {
		return false
	}
	t.st.escaped[pid] = start
	return true
}

// leftovers lists the processes of the tree still alive after a kill gave
// up: the containment's and those of live (the last sweep's), the exited
// leader excluded. It remembers them for Survivors.
func (t *Tree) leftovers(live []int) []Process {
	pids, _ := t.c.procs() // an error: the sweep's list alone
	pids = t.liveMembers(append(pids, live...))
	var out []Process
	buf := make([]byte, 1024)
	for _, pid := range pids {
		p, ok := readStat(pid, buf)
		if !ok || p.zombie() {
			continue
		}
		out = append(out, Process{Pid: pid, Comm: procfs.Comm(pid)})
		t.mu.Lock()
		t.st.left[pid] = p.start
		t.mu.Unlock()
	}
	return out
}

// survivors lists the processes a kill could not end that are still alive
// (same PID and start time, not a zombie).
func (t *Tree) survivors() []Process {
	t.mu.Lock()
	if len(t.st.left) == 0 {
		t.mu.Unlock()
		return nil
	}
	left := make(map[int]uint64, len(t.st.left))
	for p, s := range t.st.left {
		left[p] = s
	}
	t.mu.Unlock()
	var out []Process
	buf := make([]byte, 1024)
	for pid, start := range left {
		p, ok := readStat(pid, buf)
		if !ok || p.zombie() || p.start != start {
			t.mu.Lock()
			delete(t.st.left, pid)
			t.mu.Unlock()
			continue
		}
		out = append(out, Process{Pid: pid, Comm: procfs.Comm(pid)})
	}
	sortProcesses(out)
	return out
}

// leftBehind reports whether a kill that gave up left pid (with this start
// time) as a survivor.
func (t *Tree) leftBehind(pid int, start uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.st.left[pid]
	return ok && s == start
}
