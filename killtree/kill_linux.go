package killtree

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// This file is the whole-tree kill of the Linux baseline (Tree.kill): the
// containment's blow, the group kill, the wait for the containment to
// empty, and the sweep's rounds until nothing of the tree is left.

// nestedAfter is how long members may outlive the sweep's SIGKILL before
// it runs the stale sweep for them (see Tree.sweep).
const nestedAfter = 100 * time.Millisecond

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

// sweep is the baseline, in rounds over one /proc pass each, until no live
// member and no reapable zombie is left: reap what is ours; stop the live
// members that may have forked since the pass and pass again (not the
// members of the leader's group when groupStopped says that group was
// stopped before the pass); kill every live member, thawing the frozen
// cgroups of one that outlived its SIGKILL (thawFrozen); and, once
// something was killed, the stale sweep (staleRound). It returns how many
// processes outside the tier's scope it killed, counting each process once
// over the tree's life, and, past deadline, the members still alive.
func (t *Tree) sweep(deadline time.Time, killed map[int]bool, groupStopped bool, began uint64) (int, []int, error) {
	s := &sweeper{t: t, deadline: deadline, killed: killed, groupStopped: groupStopped, began: began,
		gone: map[int]bool{}, stopped: map[int]bool{}, sigkilled: map[int]bool{}, backoff: 200 * time.Microsecond}
	for {
		ps, err := t.scanTree()
		if err != nil {
			return s.escapees, nil, err
		}
		live := t.live(ps)
		switch reaped := s.reapRound(ps, live); {
		case len(live) == 0 && reaped == 0:
			// 1. Nothing left of the tree: once something was killed,
			// the stale sweep, whose finds the next rounds reap.
			if s.staleRound() {
				continue
			}
			return s.escapees, nil, nil
		case len(live) == 0 && reaped < 0:
			// 2. A killed process is still on its way out.
			if err := s.waitRound(); err != nil {
				return s.escapees, nil, err
			}
			continue
		}
		// 3. Members that may have forked since the pass: stop, pass again.
		if s.stopRound(ps) {
			continue
		}
		// 4. Kill every live member.
		if err := s.killRound(ps, live); err != nil {
			return s.escapees, live, err
		}
	}
}

// sweeper is the memory of one sweep (see Tree.sweep).
type sweeper struct {
	t            *Tree
	deadline     time.Time
	killed       map[int]bool // every process the kill killed (the caller's)
	groupStopped bool         // the leader's group was stopped before the sweep
	began        uint64       // boot ticks when the kill began (settleKilled)
	gone         map[int]bool // killed processes seen gone, or not ours to wait for
	stopped      map[int]bool // processes stopRound stopped
	sigkilled    map[int]bool // processes killRound sent SIGKILL
	escapees     int
	stopRounds   int
	backoff      time.Duration // between kill rounds, doubling to 20 ms
	firstKill    time.Time     // the first kill round
	staleDone    bool          // the stale sweep ran
	failed       firstErr      // the first signal that failed other than with ESRCH
}

// reapRound reaps the zombies of ps that are ours and returns how many.
// With no live member (live) and none reaped, what was killed may still be
// on its way out: out of its cgroup and its memory gone (so no pass
// attributes it), not yet a zombie, or a zombie of a killed parent that
// hands it to us as it ends; confirmed empty means all of it is gone
// (settleKilled). A reaper's main thread may be a zombie while its other
// threads still exit, and they hold its children until the last one is
// gone: -1 says a round must wait for either.
func (s *sweeper) reapRound(ps []proc, live []int) int {
	t := s.t
	reaped := t.reapZombies(ps)
	if len(live) > 0 || reaped != 0 {
		return reaped
	}
	reaped = t.settleKilled(s.killed, s.gone, s.began)
	if reaped == 0 && t.hasReaper() && !t.pidfdExited() {
		return -1
	}
	return reaped
}

// staleRound runs the stale sweep once, and only once something was killed
// (a tree that ended alone costs no more); it reports whether it found
// anything (see stale).
func (s *sweeper) staleRound() bool {
	return !s.staleDone && len(s.killed) > 0 && s.stale()
}

// stale runs the stale sweep (sweepDeadInstances): the containments of a
// corral instance that died with this tree die with it. Their processes
// left this tree's containment: they count as escapees, and the next rounds
// reap them. It reports whether it found any.
func (s *sweeper) stale() bool {
	s.staleDone = true
	found := s.t.sweepDeadInstances()
	for _, p := range found {
		if !s.killed[p] {
			s.killed[p] = true
			s.escapees++
		}
	}
	return len(found) > 0
}

// waitRound waits for a killed process on its way out, or gives up past
// the deadline.
func (s *sweeper) waitRound() error {
	if time.Now().After(s.deadline) {
		return fmt.Errorf("killtree: the tree of %d is not gone: a killed process has not ended or cannot be reaped: %w", s.t.pid, ErrNotEmpty)
	}
	time.Sleep(s.backoff) // a zombie not yet waitable; not synchronisation
	return nil
}

// stopRound SIGSTOPs the live members of ps not stopped yet and reports
// whether the pass must be repeated (see stopFresh), at most maxStopRounds
// times.
func (s *sweeper) stopRound(ps []proc) bool {
	if s.t.stopFresh(ps, s.stopped, s.groupStopped) > 0 && s.stopRounds < maxStopRounds {
		s.stopRounds++
		return true
	}
	return false
}

// killRound counts the escapees among live, SIGKILLs the group and every
// live member, and thaws the frozen cgroups of a member that outlived an
// earlier SIGKILL (after the signal: a thawed task dies before it runs).
// Past the deadline it returns the error the sweep gives up with. Members
// that outlive SIGKILL for nestedAfter may be frozen in the freezer of a
// corral that died with the tree, which only its containment's kill
// (freeze, kill, thaw) ends: the stale sweep runs then.
func (s *sweeper) killRound(ps []proc, live []int) error {
	t := s.t
	s.countEscapees(ps, live)
	_ = t.signalGroup(unix.SIGKILL) // ESRCH: empty group
	var stuck []int
	for _, p := range live {
		_, err := sendSignal(p, unix.SIGKILL) // ESRCH (the group kill got it first) is no error
		s.failed.keep(err)
		if s.sigkilled[p] {
			stuck = append(stuck, p)
		}
		s.sigkilled[p] = true
	}
	if len(stuck) > 0 {
		t.thawFrozen(stuck)
	}
	if time.Now().After(s.deadline) {
		return s.failed.notEmpty("killtree: %d processes of %d still alive", len(live), t.pid)
	}
	if s.firstKill.IsZero() {
		s.firstKill = time.Now()
	} else if !s.staleDone && time.Since(s.firstKill) > nestedAfter {
		s.stale()
	}
	if len(live) > 0 {
		time.Sleep(s.backoff) // let SIGKILL land before the next pass; not synchronisation
		s.backoff = min(2*s.backoff, 20*time.Millisecond)
	}
	return nil
}

// countEscapees records the live members as killed, counting those outside
// the tier's scope. It counts before the kill: the group kill can make a
// member vanish before its own SIGKILL, which then returns ESRCH.
func (s *sweeper) countEscapees(ps []proc, live []int) {
	inC := s.t.containmentSet()
	for _, p := range live {
		if !s.killed[p] {
			s.killed[p] = true
			if s.t.escaped(p, ps, inC) && s.t.countEscapee(p, ps) {
				s.escapees++
			}
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
