package killtree

import (
	"context"
	"fmt"
	"github.com/corral-sh/corral/killtree/internal/procfs"
	"time"

	"golang.org/x/sys/unix"
)

// This file finds a tree's members on the Linux baseline: which processes
// of a /proc pass belong to the tree (attribute), its live members
// (members) and stopping them (stop).

// attribute returns the processes of ps that belong to the tree, zombies
// included, and remembers them. Caller holds t.mu.
//
// A process belongs to the tree when it is the leader, is in the leader's
// session or group or in a session or group of a process attributed earlier,
// was attributed earlier (same PID and start time), descends from any of
// those, or is an orphan reparented to this subreaper that carries the tree's
// EnvTag (live) or sits in the tree's cgroup (zombie), or, with
// Config.SoleTree, any orphan of this process, or, with Config.OwnProcess,
// any orphan born while this tree was the only one alive (births). With Config.Reaper the
// leader is the tree's reaper and every orphan of the tree is its
// descendant. Without either, the residual ambiguity:
// an orphan that replaced its environment, left the cgroup, and whose parent
// died before any scan saw it, is not attributed (the pipe-holder scan still
// finds it if it holds our output); and a zombie orphan of a pgroup tree that
// no scan saw alive is left unreaped rather than risk reaping a child that
// other code in this process owns (os/exec would then lose its status:
// docs/killtree.md §2.3, E12).
func (t *Tree) attribute(ps []proc) []proc {
	if len(ps) == 0 {
		return nil // the common case after a shell exited alone: no maps, no getsid
	}
	st := &t.st
	self := selfPid
	selfSid, _ := unix.Getsid(0)
	envKV := EnvTag + "=" + t.tag
	children := make(map[int][]int, len(ps))
	byPid := make(map[int]int, len(ps))
	var queue []int
	in := map[int]bool{}
	for i, p := range ps {
		byPid[p.pid] = i
		children[p.ppid] = append(children[p.ppid], p.pid)
		if p.pid == self || p.pid <= 1 {
			continue
		}
		if t.isRoot(p, self, selfSid, envKV) {
			in[p.pid] = true
			queue = append(queue, p.pid)
		}
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, c := range children[pid] {
			if !in[c] && c != self {
				if c != t.pid && ownedElsewhere(c) {
					continue
				}
				in[c] = true
				queue = append(queue, c)
			}
		}
	}
	out := make([]proc, 0, len(in))
	for pid := range in {
		p := ps[byPid[pid]]
		out = append(out, p)
		st.seen[p.pid] = p.start
		// A zombie's session and group still name the session leader
		// that made them, which may itself be a zombie child of ours by
		// now (a double fork's middle process: it called setsid, forked,
		// and exited after its parent died).
		for _, g := range []int{p.sid, p.pgid} {
			if g > 1 && g != selfSid && g != self {
				st.groups[g] = true
			}
		}
	}
	return out
}

func (t *Tree) isRoot(p proc, self, selfSid int, envKV string) bool {
	st := &t.st
	if p.pid == t.pid || p.sid == t.pid || p.pgid == t.pid {
		return true
	}
	if ownedElsewhere(p.pid) {
		return false
	}
	if s, ok := st.seen[p.pid]; ok && s == p.start {
		return true
	}
	if (st.groups[p.sid] && p.sid != selfSid) || (st.groups[p.pgid] && p.pgid != self) {
		return true
	}
	if p.ppid != self {
		return false
	}
	if t.m.cfg.SoleTree {
		// One tree, no other children of ours (Config.SoleTree): an
		// orphan of ours that no other rule claims can only be this
		// tree's, whatever it did to its scopes and environment.
		return true
	}
	if t.m.cfg.OwnProcess && t.m.plat.births.at(t, p.start).onlyIn() {
		// No other children of ours (Config.OwnProcess), and this tree
		// was the only one alive when it was born.
		return true
	}
	if !p.zombie() {
		return procfs.EnvironHas(p.pid, envKV)
	}
	// A zombie child of ours cannot be recycled before we reap it, so a PID
	// the containment listed and killed still names the same process.
	return st.dead[p.pid] || (st.cgLeaf != "" && procfs.InCgroup(p.pid, st.cgLeaf))
}

// scanTree runs one pass over the processes that can belong to the tree (see
// scanDescendants) and returns the tree's.
func (t *Tree) scanTree() ([]proc, error) { return t.scanTreeCtx(context.Background()) }

// scanTreeCtx is scanTree ending with ctx (see scanDescendants).
func (t *Tree) scanTreeCtx(ctx context.Context) ([]proc, error) {
	ps, err := scanDescendants(ctx, t.m.plat.own, t.pid, t.rootGone())
	if err != nil {
		return nil, fmt.Errorf("killtree: scan /proc: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attribute(ps), nil
}

// live filters out zombies and the exited leader.
func (t *Tree) live(ps []proc) []int {
	var out []int
	for _, p := range ps {
		if !p.zombie() {
			out = append(out, p.pid)
		}
	}
	return out
}

// members lists the tree's live processes. On the cgroup tiers that is the
// cgroup's own list: one read, which a fork bomb cannot starve the way it
// starves a walk of /proc (docs/killtree.md §2.3, E2; the KillBomb rows of
// docs/performance.md); processes that left the cgroup are found by
// Kill's sweep and reported as escapees. On pgroup it is the descendants the
// baseline attributes to the tree, from a scan that ends with ctx.
func (t *Tree) members(ctx context.Context) ([]int, error) {
	t.awaitReaper()
	exited := t.rootGone() // before any listing: a live leader can still fork
	cp, err := t.c.procs()
	if err != nil {
		return nil, err
	}
	if t.tier == TierPgroup {
		ps, err := t.scanTreeCtx(ctx)
		if err != nil {
			return nil, err
		}
		live := t.live(ps)
		if exited && len(live) == 0 && !t.reapable(ps) {
			t.markGone()
		}
		cp = append(cp, live...)
	} else {
		// Every PID a containment listed is ours to reap once it is a
		// zombie; on cgroup v1 nothing else names a zombie's cgroup (it
		// shows "/" there, kernel/cgroup/cgroup.c proc_cgroup_show).
		t.mu.Lock()
		for _, p := range cp {
			t.st.dead[p] = true
		}
		t.mu.Unlock()
		if exited && len(cp) == 0 {
			// The cgroup is empty for good. One scan tells whether
			// anything left it or is left to reap; if not, the tree is
			// gone and Kill has nothing to do. Escapees stay Kill's to
			// find and count, as they are not counted here.
			if ps, err := t.scanTreeCtx(ctx); err == nil && len(t.live(ps)) == 0 && !t.reapable(ps) {
				t.markGone()
			}
		}
	}
	return t.liveMembers(cp), nil
}

// markGone records that the tree is empty for good (see treeState.gone).
func (t *Tree) markGone() {
	t.mu.Lock()
	t.st.gone = true
	t.mu.Unlock()
}

// stop keeps the tree from growing and lists its live members (see
// Tree.Stop). On pgroup the group stop comes first: the members of the
// leader's group then stand still, and one scan finds them all; a member
// outside that group (setsid, setpgid) may have forked before its own
// SIGSTOP, so finding one sends the scan round again.
func (t *Tree) stop() ([]int, error) {
	if t.tier != TierPgroup {
		return t.members(context.Background())
	}
	groupStopped := t.signalGroup(unix.SIGSTOP) == nil // ESRCH: an empty group
	stopped := map[int]bool{}
	for round := 0; ; round++ {
		ps, err := t.scanTree()
		if err != nil {
			return nil, err
		}
		if t.stopFresh(ps, stopped, groupStopped) == 0 || round == maxStopRounds {
			return t.liveMembers(t.live(ps)), nil
		}
		time.Sleep(time.Millisecond) // lets a stopping process reach its stop; not synchronisation
	}
}

// maxStopRounds bounds the scans that look for members forked by a member
// found running (a setsid bomb outgrows every round; Kill ends it anyway).
const maxStopRounds = 8

// stopFresh SIGSTOPs every live process of ps not in stopped, records it
// there, and returns how many processes may have forked since the scan, so
// that another scan is due: every process it just stopped and every one
// stopped earlier that has not reached its stop yet (a SIGSTOP sent to one
// process while it forks stops the parent only, after the child exists),
// except, when the leader's group was stopped before the scan, the members
// of that group (a group signal is atomic against fork, kernel/fork.c
// copy_process).
func (t *Tree) stopFresh(ps []proc, stopped map[int]bool, groupStopped bool) int {
	fresh := 0
	for _, p := range ps {
		if p.zombie() {
			continue
		}
		if !stopped[p.pid] {
			stopped[p.pid] = true
			_ = unix.Kill(p.pid, unix.SIGSTOP) // ESRCH: it died meanwhile
		} else if p.state == 'T' || p.state == 't' {
			continue
		}
		if !groupStopped || p.pgid != t.pid {
			fresh++
		}
	}
	return fresh
}
