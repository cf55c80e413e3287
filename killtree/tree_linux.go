package killtree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ownChildren holds the PIDs of this process's own children that no tree may
// claim or reap: every tree leader (os/exec reaps it) and every watchdog. A
// leader's entry holds its pidfd: once os/exec has reaped the leader, its PID
// can be recycled before Tree.Close removes the entry (on a busy machine with
// pid_max 32768 that happens within seconds), and the process that got it
// is not the leader (see ownedElsewhere).
var ownChildren sync.Map // pid -> *os.File (a leader's pidfd) or struct{} (a watchdog)

// ownedElsewhere reports whether pid is a child of ours that no tree may
// claim or reap: a watchdog, or a tree's leader not yet reaped.
func ownedElsewhere(pid int) bool {
	v, ok := ownChildren.Load(pid)
	if !ok {
		return false
	}
	f, ok := v.(*os.File)
	return !ok || !reaped(f)
}

// reaped reports whether the process of pidfd f has been reaped, or f is
// closed (its tree is closed, which is after the reap).
func reaped(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	gone := true
	if err := rc.Control(func(fd uintptr) {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		gone = errors.Is(err, unix.ECHILD)
	}); err != nil {
		return true
	}
	return gone
}

// treeState is the Linux baseline's memory of a tree.
type treeState struct {
	pidfd  *os.File       // pidfd of the leader, never registered with the runtime's poller
	watch  *os.File       // the exit watcher's non-blocking copy of pidfd; nil until Exited is called
	seen   map[int]uint64 // pid -> start time of every process ever attributed
	groups map[int]bool   // session and group IDs of attributed processes
	cgLeaf string         // cgroup path suffix (relative), for zombie attribution; "" on pgroup
	dead   map[int]bool   // PIDs the containment kill listed: their zombies are ours to reap
	// leftUnattributed: the last kill's strays pass left processes born
	// while this tree and another lived (Config.OwnProcess; births).
	leftUnattributed bool
	// status is the read end of the reaper's status pipe (Config.Reaper),
	// nil without a reaper; statusRead, ws and wsOK hold what it said.
	status     *os.File
	statusRead bool
	awaited    bool // awaitReaper waited once
	ws         unix.WaitStatus
	wsOK       bool
	// escaped holds the processes (pid -> start time) counted as escapees,
	// so that one process is counted once however many passes meet it.
	escaped map[int]uint64
	// left holds the processes (pid -> start time) a kill could not end
	// by its deadline; Survivors checks which of them still live.
	left map[int]uint64
	// gone records that a scan begun after the leader's exit found no live
	// member (and, on the cgroup tiers, an empty cgroup and nothing that
	// left it) and no zombie of ours to reap. That state is final (only a
	// live member can add one), so Kill has nothing left to do.
	gone bool
}

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
		return environHas(p.pid, envKV)
	}
	// A zombie child of ours cannot be recycled before we reap it, so a PID
	// the containment listed and killed still names the same process.
	return st.dead[p.pid] || (st.cgLeaf != "" && inCgroup(p.pid, st.cgLeaf))
}

// inCgroup reports whether /proc/<pid>/cgroup names a cgroup whose path ends
// with leaf (a zombie keeps its cgroup until it is reaped).
func inCgroup(pid int, leaf string) bool {
	b, err := readKernelFile("/proc/"+strconv.Itoa(pid)+"/cgroup", nil)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasSuffix(line, leaf) {
			return true
		}
	}
	return false
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
// starves a walk of /proc (docs/killtree.md §2.3, E2, and the KillBomb rows
// of the README's Performance section); processes that left the cgroup are found by
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

// nestedAfter is how long members may outlive the sweep's SIGKILL before
// it runs the stale sweep for them (see Tree.sweep).
const nestedAfter = 100 * time.Millisecond

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

func (t *Tree) signal(sig syscall.Signal) (int, error) {
	// Frozen or stopped, the members cannot fork between the listing and
	// the signal, and a bomb stops burning the CPU this needs; the signals
	// are delivered at the thaw or the SIGCONT below.
	if err := t.c.pause(true); err == nil {
		defer t.c.pause(false) // a failed thaw leaves Kill to end the tree
	}
	pids, err := t.stop()
	if err != nil {
		return 0, err
	}
	_ = t.signalGroup(unix.Signal(sig)) // ESRCH: the group is gone; its members are in pids anyway
	_ = t.signalGroup(unix.SIGCONT)
	n := 0
	for _, p := range pids {
		if unix.Kill(p, unix.Signal(sig)) == nil {
			n++
		}
		_ = unix.Kill(p, unix.SIGCONT) // ESRCH ignored: it died meanwhile
	}
	return n, nil
}

// kill is the whole kill: containment, group, sweeps, reaping.
func (t *Tree) kill(deadline time.Time) (rep Report, err error) {
	if t.m.cfg.OwnProcess {
		defer func() {
			rep.Strays, rep.Unattributed = t.strays(deadline)
			t.mu.Lock()
			t.st.leftUnattributed = len(rep.Unattributed) > 0
			t.mu.Unlock()
		}()
	}
	t.mu.Lock()
	gone := t.st.gone
	t.mu.Unlock()
	if gone {
		// The scan that proved it (Members, WaitEmpty) is the kill's sweep.
		return rep, nil
	}
	killed := map[int]bool{}
	began := bootTicks()
	wasExited := t.leaderExited()
	if t.tier != TierPgroup && t.hasReaper() && !t.rootGone() {
		// The containment's blow kills the reaper too, and its orphans
		// then come to this process: first freeze the containment and
		// stop and record what lives under the reaper outside it.
		_ = t.c.pause(true) // an error: the sweep below still stops them one by one
		t.stopUnderReaper()
	}
	// 1. The containment's own blow (cgroup.kill, freezer loop); its list
	// counts as killed.
	// On an error the baseline below still runs: it can kill and reap
	// what the containment could not.
	pids, cerr := t.c.kill(deadline)
	t.mu.Lock()
	for _, p := range pids {
		killed[p] = true
		t.st.dead[p] = true
	}
	t.mu.Unlock()
	// 2. The group kill. SIGSTOP first: it is atomic against fork like
	// SIGKILL (kernel/fork.c copy_process re-checks pending group signals
	// before the child becomes visible; docs/killtree.md §2.1), so the sweep below scans a group that stands
	// still and can count it.
	// With a reaper the group holds the reaper, which must go on reaping
	// while the sweep runs: its members are stopped and scanned one by one.
	groupStopped := t.signalGroup(unix.SIGSTOP) == nil && !t.hasReaper() // ESRCH: empty group
	// 3. Wait for the containment to empty (no-op for pgroup, and when the
	// containment listed no one).
	if cerr == nil && len(pids) > 0 {
		cerr = t.waitContainment(deadline)
	}
	// 4. Sweeps until no live process and no reapable zombie is left.
	esc, live, err := t.sweep(deadline, killed, groupStopped, began)
	rep.Escapees = esc
	rep.Processes = len(killed)
	if wasExited || t.hasReaper() { // the reaper is ours, not the command's
		delete(killed, t.pid)
		rep.Processes = len(killed)
	}
	// 5. Past the deadline: whatever of the tree still lives is named.
	if cerr != nil || err != nil {
		rep.Alive = t.leftovers(live)
		rep.Survivors = len(rep.Alive)
	}
	return rep, errors.Join(cerr, err)
}

// stopUnderReaper stops every live process of the tree (scan, SIGSTOP the
// new ones, scan again until none is new, eight rounds at most), so that
// each is recorded as a member before the reaper dies.
func (t *Tree) stopUnderReaper() {
	stopped := map[int]bool{}
	for round := 0; round < 8; round++ {
		ps, err := t.scanTree()
		if err != nil {
			return // the sweep after the blow scans again
		}
		fresh := false
		for _, p := range t.live(ps) {
			if !stopped[p] {
				stopped[p] = true
				fresh = true
				_ = unix.Kill(p, unix.SIGSTOP) // ESRCH: it died meanwhile
			}
		}
		if !fresh {
			return
		}
	}
}

// waitContainment waits for the containment to empty after its kill. A
// member still there after a short wait outlived its SIGKILL: frozen (its
// cgroup is thawed where the tree may, see thawFrozen) or held in the kernel.
// It is killed again, with waits doubling up to a second, until deadline.
//
// Members still there after nestedAfter may be frozen in the v1 freezer of
// a corral that died with the tree (its own kill froze them and was cut
// short): the stale sweep runs once then, whose kill thaws them.
func (t *Tree) waitContainment(deadline time.Time) error {
	step := 100 * time.Millisecond
	start, swept := time.Now(), false
	for {
		ctx, cancel := contextUntil(earliest(time.Now().Add(step), deadline))
		err := t.c.waitEmpty(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("killtree: containment of %d: %w", t.pid, ErrNotEmpty)
		}
		if !swept && time.Since(start) >= nestedAfter {
			swept = true
			_ = t.sweepDeadInstances() // marks what it kills of ours for reaping
		}
		if pids, err := t.c.procs(); err == nil {
			t.thawFrozen(pids)
		}
		if _, err := t.c.kill(deadline); err != nil { // kill again: something survived
			return err
		}
		step = min(2*step, time.Second)
	}
}

// sweep is the baseline: per round one /proc pass; new live members are
// stopped and the pass repeated (so children forked meanwhile are seen; not
// for members of the leader's group when groupStopped says that group was
// stopped before the pass), then every live member is SIGKILLed;
// attributable zombies are reaped. A member that outlives its SIGKILL has
// its frozen cgroups thawed where the tree may (thawFrozen). It returns how
// many processes outside the tier's scope it killed, counting each process
// once over the tree's life, and, past deadline, the members still alive.
func (t *Tree) sweep(deadline time.Time, killed map[int]bool, groupStopped bool, began uint64) (int, []int, error) {
	gone := map[int]bool{} // killed processes seen gone, or not ours to wait for
	stopped := map[int]bool{}
	sigkilled := map[int]bool{}
	escapees := 0
	stopRounds := 0
	backoff := 200 * time.Microsecond
	var firstKill time.Time
	var failed firstErr
	nestedDone := false
	// nested runs the stale sweep once something was killed (see
	// sweepDeadInstances): the containments of a corral instance that
	// died with this tree die with it. Their processes left this tree's
	// containment: they count as escapees, and the next rounds reap them.
	nested := func() bool {
		nestedDone = true
		found := t.sweepDeadInstances()
		for _, p := range found {
			if !killed[p] {
				killed[p] = true
				escapees++
			}
		}
		return len(found) > 0
	}
	for {
		ps, err := t.scanTree()
		if err != nil {
			return escapees, nil, err
		}
		reaped := t.reapZombies(ps)
		live := t.live(ps)
		if len(live) == 0 && reaped == 0 {
			// What was killed may still be on its way out: out of its
			// cgroup and its memory gone (so no scan attributes it), not
			// yet a zombie, or a zombie of a killed parent that hands it
			// to us as it ends. Confirmed empty means all of it is gone.
			reaped = t.settleKilled(killed, gone, began)
		}
		if len(live) == 0 && reaped == 0 && t.hasReaper() && !t.pidfdExited() {
			// The reaper's main thread may be a zombie while its other
			// threads still exit, and they hold its children until the
			// last one is gone; then the children come to this process.
			reaped = -1
		}
		if len(live) == 0 && reaped == 0 {
			// A tree that ended alone (nothing killed) costs no more.
			if !nestedDone && len(killed) > 0 && nested() {
				continue
			}
			return escapees, nil, nil
		}
		if len(live) == 0 && reaped < 0 {
			if time.Now().After(deadline) {
				return escapees, nil, fmt.Errorf("killtree: the tree of %d is not gone: a killed process has not ended or cannot be reaped: %w", t.pid, ErrNotEmpty)
			}
			time.Sleep(backoff) // a zombie not yet waitable; not synchronisation
			continue
		}
		if t.stopFresh(ps, stopped, groupStopped) > 0 && stopRounds < maxStopRounds {
			stopRounds++
			continue
		}
		// Count before killing: the group kill below can make a member
		// vanish before its own SIGKILL, which then returns ESRCH.
		inC := t.containmentSet()
		for _, p := range live {
			if !killed[p] {
				killed[p] = true
				if t.escaped(p, ps, inC) && t.countEscapee(p, ps) {
					escapees++
				}
			}
		}
		_ = t.signalGroup(unix.SIGKILL) // ESRCH: empty group
		var stuck []int
		for _, p := range live {
			_, err := sendSignal(p, unix.SIGKILL) // ESRCH (the group kill got it first) is no error
			failed.keep(err)
			if sigkilled[p] {
				stuck = append(stuck, p)
			}
			sigkilled[p] = true
		}
		if len(stuck) > 0 {
			t.thawFrozen(stuck) // after the signal: a thawed task dies before it runs
		}
		if time.Now().After(deadline) {
			return escapees, live, failed.notEmpty("killtree: %d processes of %d still alive", len(live), t.pid)
		}
		if firstKill.IsZero() {
			firstKill = time.Now()
		} else if !nestedDone && time.Since(firstKill) > nestedAfter {
			// Members outlive SIGKILL: one may be frozen in the
			// freezer of a corral that died with the tree, which
			// only its containment's kill (freeze, kill, thaw) ends.
			nested()
		}
		if len(live) > 0 {
			time.Sleep(backoff) // let SIGKILL land before the next pass; not synchronisation
			backoff = min(2*backoff, 20*time.Millisecond)
		}
	}
}

// escaped reports whether p was outside the tier's scope: for the cgroup
// tiers every process not in the containment (inC, its processes when the
// pass began; a member frozen there outlives the cgroup's kill without
// having left it); for pgroup every process outside the leader's group.
func (t *Tree) escaped(pid int, ps []proc, inC map[int]bool) bool {
	if t.tier != TierPgroup {
		return !inC[pid]
	}
	for _, p := range ps {
		if p.pid == pid {
			return p.pgid != t.pid
		}
	}
	return false
}

// release closes the pidfd and the watcher's copy (which ends the watcher)
// and marks the exit: Close killed the tree first.
func (t *Tree) release() error {
	ownChildren.Delete(t.pid)
	t.shellStatus() // read it while the pipe is open: ShellExit works after Close
	t.mu.Lock()
	f, w, s := t.st.pidfd, t.st.watch, t.st.status
	t.st.pidfd, t.st.watch = nil, nil
	t.mu.Unlock()
	defer t.markExited()
	var errs []error
	for _, c := range []*os.File{w, f, s} {
		if c == nil {
			continue
		}
		if err := c.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, fmt.Errorf("killtree: close pidfd: %w", err))
		}
	}
	return errors.Join(errs...)
}
