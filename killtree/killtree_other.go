//go:build unix && !linux

package killtree

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// On macOS and the BSDs only the pgroup tier exists, without a subreaper:
// orphans reparent to init, so the sweep follows the leader's session and
// group, the descendants of every process it saw, and processes seen before
// (PID and creation time). A process that leaves the session and whose
// parent exits before a sweep sees it is out of reach (research notes §5).

type platform struct {
	cfg      Config
	instance string
}

func detect(cfg Config) []TierStatus {
	return []TierStatus{
		{Tier: TierCgroup2, Reason: "Linux only"},
		{Tier: TierCgroup1, Reason: "Linux only"},
		{Tier: TierPgroup, Works: true, Reason: "own session, kill(-pgid) while the leader is unreaped, descendant walk; no subreaper, no fork limit"},
		{Tier: TierJob, Reason: "Windows only"},
	}
}

// uproc is one process of a listing.
type uproc struct {
	pid, ppid, pgid int
	zombie          bool
	start           int64
}

// leaderGone reports whether pid is a zombie or no longer exists.
func leaderGone(pid int) bool {
	ps, err := listProcs()
	if err != nil {
		return unix.Kill(pid, 0) != nil
	}
	for _, p := range ps {
		if p.pid == pid {
			return p.zombie
		}
	}
	return true
}

func newPlatform(cfg Config, tier Tier) (*platform, error) {
	if cfg.Reaper {
		return nil, fmt.Errorf("killtree: a per-command reaper needs Linux (PR_SET_CHILD_SUBREAPER): %w", ErrUnavailable)
	}
	return &platform{cfg: cfg, instance: strconv.Itoa(os.Getpid())}, nil
}

func (p *platform) newContainment(id string) (containment, error) { return pgroupC{}, nil }

// start starts cmd in a fresh containment (see startFresh).
func (p *platform) start(cmd *exec.Cmd, name func(id string)) (containment, error) {
	return startFresh(p.newContainment, cmd, name)
}

// destroy removes a closed tree's containment.
func (p *platform) destroy(c containment, empty bool) error { return c.destroy() }

func (p *platform) close() error { return nil }

// treeState remembers every process the sweeps attributed to the tree.
type treeState struct {
	seen map[int]int64 // pid -> start time
	left []int         // what the last kill that gave up left alive
}

func (t *Tree) afterStart() error {
	t.st.seen = map[int]int64{}
	t.wg.Add(1)
	go t.watchExit()
	return nil
}

// startWatch does nothing: the watcher runs from the start here.
func (t *Tree) startWatch() {}

// exitPending is false: only the watcher observes the exit here.
func (t *Tree) exitPending() bool { return false }

// watchExit polls the leader's state until it is a zombie (exited, not
// reaped) or gone, or the tree is closed, and then closes t.exited.
func (t *Tree) watchExit() {
	defer t.wg.Done()
	defer t.markExited()
	for {
		if leaderGone(t.pid) {
			return
		}
		t.mu.Lock()
		closed := t.closed
		t.mu.Unlock()
		if closed {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling the leader's state; there is no pidfd here
	}
}

// treeProcs lists all processes once and returns the tree's live ones.
func (t *Tree) treeProcs() ([]int, error) {
	all, err := listProcs()
	if err != nil {
		return nil, fmt.Errorf("killtree: list processes: %w", err)
	}
	children := map[int][]uproc{}
	var roots []uproc
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range all {
		children[p.ppid] = append(children[p.ppid], p)
		sid, _ := unix.Getsid(p.pid)
		if p.pid == t.pid || p.pgid == t.pid || sid == t.pid || (t.st.seen[p.pid] == p.start && p.start != 0) {
			roots = append(roots, p)
		}
	}
	in := map[int]bool{}
	var out []int
	for len(roots) > 0 {
		p := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if in[p.pid] || p.pid == os.Getpid() {
			continue
		}
		in[p.pid] = true
		t.st.seen[p.pid] = p.start
		roots = append(roots, children[p.pid]...)
		if !p.zombie {
			out = append(out, p.pid)
		}
	}
	return out, nil
}

// members lists the tree's live processes; one listing, which ctx does not
// interrupt.
func (t *Tree) members(ctx context.Context) ([]int, error) {
	pids, err := t.treeProcs()
	if err != nil {
		return nil, err
	}
	return t.liveMembers(pids), nil
}

// stop SIGSTOPs the leader's group (atomic against fork), then lists the
// members and stops each of them (see Tree.Stop).
func (t *Tree) stop() ([]int, error) {
	_ = t.signalGroup(unix.SIGSTOP) // ESRCH: empty group
	pids, err := t.members(context.Background())
	for _, p := range pids {
		_ = unix.Kill(p, unix.SIGSTOP) // ESRCH: gone meanwhile
	}
	return pids, err
}

func (t *Tree) signalGroup(sig unix.Signal) error {
	// The leader is unreaped until the caller's cmd.Wait after Kill, so its
	// group ID is still reserved.
	return unix.Kill(-t.pid, sig)
}

func (t *Tree) terminate() (int, error) {
	pids, err := t.stop()
	if err != nil {
		return 0, err
	}
	_ = t.signalGroup(unix.SIGTERM) // ESRCH: empty group
	_ = t.signalGroup(unix.SIGCONT)
	n := 0
	for _, p := range pids {
		if unix.Kill(p, unix.SIGTERM) == nil {
			n++
		}
		_ = unix.Kill(p, unix.SIGCONT) // ESRCH: gone meanwhile
	}
	return n, nil
}

func (t *Tree) kill(deadline time.Time) (Report, error) {
	var rep Report
	killed := map[int]bool{}
	_ = t.signalGroup(unix.SIGSTOP) // ESRCH: empty group
	stopped := map[int]bool{}
	for round := 0; ; round++ {
		pids, err := t.members(context.Background())
		if err != nil {
			return rep, err
		}
		if len(pids) == 0 {
			rep.Processes = len(killed)
			return rep, nil
		}
		fresh := false
		for _, p := range pids {
			if !stopped[p] {
				stopped[p], fresh = true, true
				_ = unix.Kill(p, unix.SIGSTOP) // ESRCH: gone meanwhile
			}
		}
		if fresh && round < 8 {
			continue
		}
		_ = t.signalGroup(unix.SIGKILL)
		for _, p := range pids {
			if unix.Kill(p, unix.SIGKILL) == nil && !killed[p] {
				killed[p] = true
				if pg, _ := unix.Getpgid(p); pg != t.pid {
					rep.Escapees++
				}
			}
		}
		if time.Now().After(deadline) {
			rep.Processes = len(killed)
			rep.Survivors = len(pids)
			for _, p := range pids {
				rep.Alive = append(rep.Alive, Process{Pid: p, Comm: "?"})
			}
			t.mu.Lock()
			t.st.left = append(t.st.left[:0], pids...)
			t.mu.Unlock()
			return rep, fmt.Errorf("killtree: %d processes of %d still alive: %w", len(pids), t.pid, ErrNotEmpty)
		}
		time.Sleep(5 * time.Millisecond) // let SIGKILL land before the next walk; not synchronisation
	}
}

func (t *Tree) killPipeHolders([]int, time.Time) (int, error) { return 0, nil }

// survivors lists the processes the last kill that gave up left, those of
// them still members of the tree now.
func (t *Tree) survivors() []Process {
	t.mu.Lock()
	left := append([]int(nil), t.st.left...)
	t.mu.Unlock()
	if len(left) == 0 {
		return nil
	}
	now, _ := t.members(context.Background())
	var out []Process
	for _, p := range left {
		if slices.Contains(now, p) {
			out = append(out, Process{Pid: p, Comm: "?"})
		}
	}
	return out
}

func (t *Tree) release() error { return nil }
