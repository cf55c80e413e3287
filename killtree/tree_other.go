//go:build unix && !linux

package killtree

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

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

func (t *Tree) signal(sig syscall.Signal) (int, error) {
	pids, err := t.stop()
	if err != nil {
		return 0, err
	}
	_ = t.signalGroup(unix.Signal(sig)) // ESRCH: empty group
	_ = t.signalGroup(unix.SIGCONT)
	n := 0
	for _, p := range pids {
		if unix.Kill(p, unix.Signal(sig)) == nil {
			n++
		}
		_ = unix.Kill(p, unix.SIGCONT) // ESRCH: gone meanwhile
	}
	return n, nil
}

func (t *Tree) kill(deadline time.Time) (Report, error) {
	var rep Report
	killed := map[int]bool{}
	var failed firstErr
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
			sent, err := sendSignal(p, unix.SIGKILL)
			failed.keep(err)
			if sent && !killed[p] {
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
			return rep, failed.notEmpty("killtree: %d processes of %d still alive", len(pids), t.pid)
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
