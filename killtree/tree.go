package killtree

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Tree's exported methods are the same on every OS. Each OS supplies the
// baseline they run on (tree_linux.go with members_linux.go, kill_linux.go,
// pidfd_linux.go, pipescan_linux.go and leftover_linux.go; tree_other.go;
// tree_windows.go), that is:
//
//	type treeState                     per-OS state, guarded by Tree.mu
//	afterStart() error                 once the leader started: pidfd or handle
//	startWatch()                       starts the leader-exit watcher where it is lazy
//	exitPending() bool                 the leader exited, not yet marked
//	members(ctx) ([]int, error)        the tree's live processes (Members)
//	stop() ([]int, error)              SIGSTOP every member (Stop)
//	signal(sig) (int, error)           sig then SIGCONT to every member (Terminate, Signal)
//	kill(deadline) (Report, error)     the whole-tree kill (Kill, KillBy)
//	killPipeHolders(pipes, deadline)   (int, error): KillPipeHolders
//	survivors() []Process              what a kill that gave up left (Survivors)
//	release() error                    frees the OS handles (Close)
//
// A file's suffix names its platforms the same way everywhere: _linux,
// _windows, _unix (every Unix), _other (Unix but Linux: the BSDs and
// macOS), _nonlinux (everything but Linux, Windows included).
//
// Beside Manager, killtree_linux.go, killtree_other.go and killtree_windows.go
// supply detect and newPlatform, and the platform's newContainment, start,
// destroy, close, and opened and ended (which bracket a tree's life for
// Config.OwnProcess: births_linux.go; no-ops elsewhere); each tier's
// containment implements the containment interface (killtree.go).

// closeKill bounds the kill Close makes of a tree that an earlier Kill or
// KillBy could not confirm empty: what outlived that is not likely to die
// now, and Close must return.
const closeKill = 100 * time.Millisecond

// Tree is one started command and its containment. It is safe for
// concurrent use. Kill it, reap the leader with cmd.Wait, then Close it.
type Tree struct {
	m    *Manager
	cmd  *exec.Cmd
	pid  int
	tier Tier
	id   string
	tag  string // value of EnvTag in the command's environment
	c    containment
	lim  Limits // resolved: 0 is none
	// bound says which limits the envelope lowered; envEvents are its
	// refusal counters when the tree started (Envelope.refusals).
	bound     bounded
	envEvents []int64

	oomFile   readCloser     // the OOM watch's notification; nil without a watch
	oomWG     sync.WaitGroup // the OOM watch's goroutine
	oomSeen   atomic.Bool    // the OOM watch fired
	oomKilled atomic.Int64   // what the OOM watch's kill killed, stored under killMu

	exited     chan struct{} // closed once the leader has exited (not reaped), or by Close
	exitedOnce sync.Once     // closes exited
	watchOnce  sync.Once     // starts the exit watcher where it is lazy (Linux)
	wg         sync.WaitGroup

	killMu sync.Mutex // serialises Kill, Terminate and Close

	mu     sync.Mutex
	st     treeState // per-OS baseline state; guarded by mu
	pipes  []int     // read ends of the output pipes; guarded by mu
	empty  bool      // Kill confirmed the tree empty; guarded by mu
	tried  bool      // a Kill ran (and may have given up); guarded by mu
	closed bool      // guarded by mu
	reaped Usage     // rusage of the orphans this tree reaped (Linux); guarded by mu
}

// Pid returns the leader's process ID, which is also the tree's session
// and process group ID: the shell's, or with Config.Reaper the reaper's.
func (t *Tree) Pid() int { return t.pid }

// Tier returns the tier that contains this tree.
func (t *Tree) Tier() Tier { return t.tier }

// Exited is closed when the leader (the shell) has exited, or at the latest
// when the tree is closed (Close kills it first). The leader is not reaped
// (a pidfd poll or waitid WNOWAIT observes it), so its process group ID
// stays reserved for a group kill; the caller reaps it with cmd.Wait after
// Kill. On Linux the first call starts the goroutine that watches for the
// exit; a caller that learns of the exit otherwise (its own pidfd) need not
// call it, and the tree then runs no goroutine at all.
func (t *Tree) Exited() <-chan struct{} {
	t.watchOnce.Do(t.startWatch)
	return t.exited
}

// markExited closes t.exited, once.
func (t *Tree) markExited() { t.exitedOnce.Do(func() { close(t.exited) }) }

// liveMembers returns pids without duplicates and without the leader once
// it has exited (an exited leader is an unreaped zombie, not a member). A
// reaper (Config.Reaper) counts as a member until it has reported the
// shell's exit: it stands for the shell, whose zombie it may not have reaped
// yet, so that a wait for the tree to empty also waits for that report.
func (t *Tree) liveMembers(pids []int) []int {
	if len(pids) == 0 {
		return pids
	}
	exited := t.leaderExited()
	seen := make(map[int]bool, len(pids))
	out := pids[:0]
	for _, p := range pids {
		if !seen[p] && !(exited && p == t.pid) {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// leaderExited reports whether the leader has exited: t.exited is closed,
// or the platform sees the exit now (a pidfd poll on Linux), which then
// closes it.
func (t *Tree) leaderExited() bool {
	select {
	case <-t.exited:
		return true
	default:
	}
	if t.exitPending() {
		t.markExited()
		return true
	}
	return false
}

// Members returns how many live processes the tree holds, the exited leader
// and zombies excluded. On the cgroup tiers it counts the cgroup's processes
// (one read, which a fork bomb cannot starve; processes that left the cgroup
// are Kill's to find and count as escapees); on pgroup the processes the
// baseline attributes to the tree (see doc.go).
func (t *Tree) Members() (int, error) {
	pids, err := t.members(context.Background())
	return len(pids), err
}

// Stop keeps the tree from growing and returns how many live processes it
// holds, the exited leader and zombies excluded: the count the way down
// takes before it signals, which a walk of a fork bomb that still forks
// would race (issue 12, item 9: 2 to 21 s). On pgroup it SIGSTOPs the
// leader's process group (atomic against fork) before the first scan, then
// every member it finds, and scans again only while it finds new members
// outside that group (at most 8 rounds); those processes stay stopped until
// Terminate (SIGTERM, then SIGCONT) or Kill. On the cgroup tiers and the job
// tier it counts as Members does (one read of the containment's list, which
// a bomb cannot starve; Terminate and Kill stop the containment atomically
// themselves) and stops nothing.
func (t *Tree) Stop() (int, error) {
	t.killMu.Lock()
	defer t.killMu.Unlock()
	pids, err := t.stop()
	return len(pids), err
}

// Terminate sends SIGTERM then SIGCONT to every member (containment
// processes, the process group, attributed descendants) and returns how many
// processes were signalled. On Windows it does nothing and returns 0.
func (t *Tree) Terminate() (int, error) {
	t.killMu.Lock()
	defer t.killMu.Unlock()
	return t.signal(syscall.SIGTERM)
}

// Signal sends sig, then SIGCONT, to every member, as Terminate does with
// SIGTERM (Terminate is Signal(SIGTERM)), and returns how many processes
// were signalled. It kills nothing by itself: a member that handles or
// ignores sig lives on. On Windows it does nothing and returns 0.
func (t *Tree) Signal(sig syscall.Signal) (int, error) {
	t.killMu.Lock()
	defer t.killMu.Unlock()
	return t.signal(sig)
}

// WaitEmpty returns nil once Members would return 0 (cgroup tiers: populated 0
// on cgroup.events through inotify, then the baseline; pgroup: /proc scans
// with a short backoff), or ctx.Err() as soon as ctx ends: a look still in
// progress then finishes on its own, and its answer is dropped (see look).
func (t *Tree) WaitEmpty(ctx context.Context) error {
	// Most trees are empty when asked (the shell exited alone): one look
	// before arming the containment's wait.
	if pids, err := t.look(ctx); err != nil || len(pids) == 0 {
		return err
	}
	if err := t.c.waitEmpty(ctx); err != nil {
		return err
	}
	backoff := time.Millisecond
	for {
		pids, err := t.look(ctx)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}

// look is members(ctx), returning ctx.Err() when ctx ends first. A scan
// stops at the first process it reads after ctx ends, but one read can
// outlast any context: reading /proc/<pid>/stat sleeps in the kernel
// (do_task_stat) while that process is in execve setting up its new stack
// (seen in its kernel stack: setup_arg_pages), and a command can stretch
// that: 1.1 s here for a bash whose exec was starved of CPU among 500
// others. So the look runs on a goroutine of its own, which finishes when
// the kernel lets it;
// members is safe to call alongside another look or a Kill. Kill's own
// scans do not do this: its deadline is looked at between its rounds (a
// round is a whole scan), so such a read can hold a Kill past its deadline
// for as long as the exec takes.
func (t *Tree) look(ctx context.Context) ([]int, error) {
	type answer struct {
		pids []int
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		pids, err := t.members(ctx)
		done <- answer{pids, err}
	}()
	select {
	case a := <-done:
		return a.pids, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Kill SIGKILLs the whole tree with the tier's mechanism plus the baseline
// (group kill while the leader is unreaped, then stop-and-kill sweeps over
// the descendants found through the subreaper, one /proc pass per round, until
// none is left), reaps orphaned zombies that belong to this tree (targeted
// waitpid, never wait4(-1), never the leader), and returns once the tree is
// confirmed empty, or with an error wrapping ErrNotEmpty after 30 s.
// Calling it again is cheap and kills whatever appeared since.
func (t *Tree) Kill() (Report, error) {
	return t.KillBy(time.Now().Add(killDeadline))
}

// KillBy is Kill with its own deadline: it gives up at deadline (or after
// 30 s, whichever comes first) and returns an error wrapping ErrNotEmpty and
// a Report whose Survivors and Alive say what of the tree still lives. The
// way down of a command whose result is due uses it, so that nothing a
// command does can hold its result back.
func (t *Tree) KillBy(deadline time.Time) (Report, error) {
	t.killMu.Lock()
	defer t.killMu.Unlock()
	return t.killByLocked(deadline)
}

// killByLocked is KillBy; the caller holds killMu.
func (t *Tree) killByLocked(deadline time.Time) (Report, error) {
	start := time.Now()
	rep, err := t.kill(earliest(deadline, start.Add(killDeadline)))
	rep.Tier = t.tier
	rep.Duration = time.Since(start)
	t.mu.Lock()
	t.tried = true
	if err == nil {
		t.empty = true
	}
	t.mu.Unlock()
	sortProcesses(rep.Alive)
	return rep, err
}

// Survivors lists the processes of the tree that a Kill, KillBy or
// KillPipeHolders call could not end and that are still alive now (same PID
// and start time), sorted by PID; nil when every kill confirmed its work.
// On Linux it reads nothing when there is nothing to check; on Windows it
// lists the job's processes until a kill confirmed the job empty.
func (t *Tree) Survivors() []Process {
	return t.survivors()
}

// sortProcesses sorts ps by PID.
func sortProcesses(ps []Process) {
	slices.SortFunc(ps, func(a, b Process) int { return a.Pid - b.Pid })
}

// WatchPipes records the descriptors of the read ends of the pipes given to
// the child (stdout, stderr); their inodes identify the processes that hold
// the write ends. A pseudo-terminal's master may be given too: the holders
// of its slave are then the ones found. They must stay open as long as
// KillPipeHolders may be called; the Tree does not close them. Only Linux
// uses them.
func (t *Tree) WatchPipes(readEnds ...int) {
	t.mu.Lock()
	t.pipes = append(t.pipes, readEnds...)
	t.mu.Unlock()
}

// KillPipeHolders kills every process other than this one that holds a write
// end of a watched pipe (Linux: /proc/*/fd links "pipe:[ino]"), repeating
// until a scan finds none, reaps what it can, and returns how many it killed
// (escapees). Elsewhere it returns 0, nil.
func (t *Tree) KillPipeHolders() (int, error) {
	return t.KillPipeHoldersBy(time.Now().Add(killDeadline))
}

// KillPipeHoldersBy is KillPipeHolders with a deadline: past it, the holders
// still alive are left, an error wrapping ErrNotEmpty is returned, and
// Survivors names them. A holder is counted once over the tree's life (an
// escapee Kill already counted is not counted again).
func (t *Tree) KillPipeHoldersBy(deadline time.Time) (int, error) {
	t.mu.Lock()
	pipes := append([]int(nil), t.pipes...)
	t.mu.Unlock()
	if len(pipes) == 0 {
		return 0, nil
	}
	return t.killPipeHolders(pipes, earliest(deadline, time.Now().Add(killDeadline)))
}

// Close destroys the containment (removes the cgroup and the cgroups nested
// in it, closes descriptors and handles) and forgets the tree. If Kill has
// not confirmed the tree empty, Close kills it first, so a containment is
// never left populated; after a Kill or KillBy that gave up, that last kill
// takes at most closeKill, so that Close stays bounded. It is idempotent. A
// containment is never reused. On the cgroup tiers the cgroup directories
// are removed in the Manager's background goroutine, after Close returns
// (killing what a nested cgroup still holds); Manager.Close waits for them
// and reports a removal that failed.
func (t *Tree) Close() error {
	t.stopOOMWatch()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	empty, tried := t.empty, t.tried
	t.mu.Unlock()
	var errs []error
	if !empty {
		limit := killDeadline
		if tried {
			limit = closeKill
		}
		if _, err := t.KillBy(time.Now().Add(limit)); err != nil {
			errs = append(errs, err)
		}
	}
	t.killMu.Lock()
	defer t.killMu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	empty = t.empty
	t.mu.Unlock()
	errs = append(errs, t.m.plat.destroy(t.c, empty), t.release())
	t.wg.Wait()
	t.m.forget(t)
	return errors.Join(errs...)
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Pids lists the live processes Members counts (the exited leader and
// zombies excluded), for a caller that looks at each of them: the cgroup's
// list on the cgroup tiers, the attributed descendants on pgroup, from a scan
// that ends with ctx. The list is a snapshot: a process may exit, and its PID
// be reused, right after it was listed.
func (t *Tree) Pids(ctx context.Context) ([]int, error) {
	return t.members(ctx)
}
