package killtree

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

// treeState holds a SYNCHRONIZE handle on the leader for the exit watcher.
type treeState struct {
	proc windows.Handle
	stop chan struct{}
}

func (t *Tree) afterStart() error {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(t.pid))
	if err != nil {
		return fmt.Errorf("killtree: OpenProcess %d: %w", t.pid, err)
	}
	t.st.proc, t.st.stop = h, make(chan struct{})
	t.wg.Add(1)
	go t.watchExit(h, t.st.stop)
	return nil
}

// startWatch does nothing: the watcher runs from the start here.
func (t *Tree) startWatch() {}

// exitPending is false: only the watcher observes the exit here.
func (t *Tree) exitPending() bool { return false }

// watchExit waits on the process handle in 100 ms slices so that release can
// stop it.
func (t *Tree) watchExit(h windows.Handle, stop chan struct{}) {
	defer t.wg.Done()
	defer t.markExited()
	for {
		ev, err := windows.WaitForSingleObject(h, 100)
		if err == nil && ev == windows.WAIT_OBJECT_0 {
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// stop only lists the members: a job has no stop that terminate or kill
// would undo, and its list is one call a bomb cannot starve.
func (t *Tree) stop() ([]int, error) { return t.members(context.Background()) }

func (t *Tree) members(ctx context.Context) ([]int, error) {
	pids, err := t.c.procs()
	if err != nil {
		return nil, err
	}
	return t.liveMembers(pids), nil
}

// signal does nothing: there are no POSIX signals, and CTRL_BREAK needs a shared
// console. The grace period then simply passes before Kill.
func (t *Tree) signal(syscall.Signal) (int, error) { return 0, nil }

func (t *Tree) kill(deadline time.Time) (Report, error) {
	pids, err := t.c.kill(deadline)
	n := len(pids)
	if t.leaderExited() {
		for _, p := range pids {
			if p == t.pid {
				n--
			}
		}
	}
	rep := Report{Processes: n}
	if err != nil {
		rep.Alive = t.survivors()
		rep.Survivors = len(rep.Alive)
	}
	return rep, err
}

func (t *Tree) killPipeHolders([]int, time.Time) (int, error) { return 0, nil }

// survivors lists the job's processes while it is open; once the job is
// closed (kill-on-close) it has none.
func (t *Tree) survivors() []Process {
	t.mu.Lock()
	empty := t.empty
	t.mu.Unlock()
	if empty {
		return nil
	}
	pids, err := t.c.procs()
	if err != nil {
		return nil
	}
	var out []Process
	for _, p := range t.liveMembers(pids) {
		out = append(out, Process{Pid: p, Comm: "?"})
	}
	return out
}

func (t *Tree) release() error {
	if t.st.stop == nil {
		return nil
	}
	close(t.st.stop)
	t.wg.Wait()
	t.st.stop = nil
	return windows.CloseHandle(t.st.proc)
}
