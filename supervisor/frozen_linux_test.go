package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
)

// freezeChild is a script that starts `sleep 60` in cgroup $f (made
// first), freezes $f (v1 freezer.state or v2 cgroup.freeze), prints
// "pid N" and waits.
func freezeChild(f string, v2 bool) string {
	file, value, frozen, state := "freezer.state", "FROZEN", "FROZEN", "freezer.state"
	if v2 {
		file, value, frozen, state = "cgroup.freeze", "1", "frozen 1", "cgroup.events"
	}
	return `f=` + f + `
mkdir -p "$f" || exit 1
(echo $BASHPID > "$f/cgroup.procs" && exec sleep 60) & c=$!
until grep -qx $c "$f/cgroup.procs"; do sleep 0.01; done
echo ` + value + ` > "$f/` + file + `"
until grep -q "` + frozen + `" "$f/` + state + `"; do sleep 0.01; done
echo pid $c
wait`
}

// watcher takes a pidfd on every process a command names on stdout with a
// "pid N" line, as the line arrives: a marker the command cannot scrub.
type watcher struct {
	t   testing.TB
	mu  sync.Mutex
	buf strings.Builder
	fds map[int]int // pid -> pidfd
}

func newWatcher(t testing.TB) *watcher {
	w := &watcher{t: t, fds: map[int]int{}}
	t.Cleanup(func() {
		w.mu.Lock()
		for _, z := range proctest.Zombies(os.Getpid()) {
			if _, ok := w.fds[z.PID]; ok {
				t.Errorf("watched process left a zombie: %v", z)
			}
		}
		w.mu.Unlock()
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, fd := range w.fds {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) // ESRCH: dead, as it should be
			unix.Close(fd)
		}
	})
	return w
}

func (w *watcher) on(ev Event) {
	if ev.Event != EventOutput || ev.Stream != Stdout {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.WriteString(ev.Data)
	for _, line := range strings.Split(w.buf.String(), "\n") {
		p, ok := strings.CutPrefix(line, "pid ")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(p)
		if _, seen := w.fds[pid]; err != nil || seen {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			w.t.Errorf("pidfd_open %d: %v", pid, err)
			continue
		}
		w.fds[pid] = fd
	}
}

// alive lists the watched processes that have not exited, and how many
// were watched.
func (w *watcher) alive() ([]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for pid, fd := range w.fds {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err != nil || n == 0 {
			out = append(out, pid)
		}
	}
	return out, len(w.fds)
}

// reapDead waits for every watched process to die (a survivor the test
// thawed) and reaps its zombie: once the Result is made nothing reaps a
// survivor that dies later, and the zombie would fail other tests' oracles.
func (w *watcher) reapDead(t *testing.T) {
	t.Helper()
	waitFor(t, func() bool { a, _ := w.alive(); return len(a) == 0 })
	w.mu.Lock()
	defer w.mu.Unlock()
	for pid := range w.fds {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil) // ECHILD: someone else's child; not ours to reap
	}
}

// TestRunFrozenChild: a root command that freezes a child of its own (in a
// cgroup nested in its leaf, or in a v1 freezer cgroup outside it) times
// out, and the Result comes within timeout + grace + 2 s, with the child
// dead and no survivor reported.
func TestRunFrozenChild(t *testing.T) {
	proctest.Heavy(t)
	safety := proctest.Safe(t, 4096)
	mnt := map[string]string{"freezer": safety.Dir("freezer"), "v2": safety.Dir("")}
	if mnt["freezer"] == "" {
		t.Skip("no v1 freezer hierarchy")
	}
	freezerRoot := filepath.Dir(mnt["freezer"])
	v2Root := filepath.Dir(mnt["v2"])
	cases := []struct {
		name string
		only killtree.Tier // "": every tier
		cmd  string
	}{
		// A v1 freezer cgroup of the command's own, outside its containment.
		{"own-v1-freezer", "", freezeChild(mnt["freezer"]+"/frz-$$", false)},
		// A frozen v1 cgroup nested in the command's freezer leaf.
		{"nested-v1", killtree.TierCgroup1, freezeChild(freezerRoot+`$(sed -n 's/^[0-9]*:freezer://p' /proc/self/cgroup)/frz`, false)},
		// A frozen v2 cgroup nested in the command's leaf.
		{"nested-v2", killtree.TierCgroup2, freezeChild(v2Root+`$(sed -n 's/^0:://p' /proc/self/cgroup)/frz`, true)},
	}
	const timeout, grace = 3 * time.Second, 300 * time.Millisecond // the timeout leaves the script time to freeze under load
	for _, tier := range tiers(t) {
		s := newSup(t, Config{Grace: grace, Containment: killtree.Config{Tier: tier, CgroupParent: safety.Name()}})
		for _, c := range cases {
			if c.only != "" && c.only != tier {
				continue
			}
			t.Run(string(tier)+"/"+c.name, func(t *testing.T) {
				w := newWatcher(t)
				begin := time.Now()
				res := run(t, s, Request{Command: c.cmd, Timeout: timeout, OnEvent: w.on})
				took := time.Since(begin)
				t.Logf("took %v; kill %+v; stderr %q", took, res.Kill, res.Stderr)
				if bound := timeout + grace + 2*time.Second; took > bound {
					t.Errorf("Result after %v, want ≤ %v", took, bound)
				}
				alive, watched := w.alive()
				if watched == 0 || len(alive) > 0 {
					t.Errorf("watched %d, alive after the Result: %v", watched, alive)
				}
				if !res.TimedOut || res.Kill.Survivors != 0 || res.Kill.Processes < 1 {
					t.Errorf("timedOut %v kill %+v", res.TimedOut, res.Kill)
				}
				if !strings.Contains(res.Stderr, "killed its process tree") {
					t.Errorf("stderr %q", res.Stderr)
				}
			})
		}
	}
}

// TestRunFrozenSurvivor: a child frozen in a freezer cgroup that also holds
// a process outside the tree cannot be thawed by corral. The Result still
// comes within timeout + grace + 2 s; it counts the survivor, names it in
// the note, never says the tree was killed, and counts an escaping process
// once however many scans met it.
func TestRunFrozenSurvivor(t *testing.T) {
	proctest.Heavy(t)
	safety := proctest.Safe(t, 4096)
	fz := safety.Dir("freezer")
	if fz == "" {
		t.Skip("no v1 freezer hierarchy")
	}
	const timeout, grace = 3 * time.Second, 300 * time.Millisecond // the timeout leaves the script time to freeze under load
	for _, tier := range tiers(t) {
		t.Run(string(tier), func(t *testing.T) {
			s := newSup(t, Config{Grace: grace, Containment: killtree.Config{Tier: tier, CgroupParent: safety.Name()}})
			bys := bystander(t, filepath.Join(fz, "bystander-"+string(tier)))
			w := newWatcher(t)
			begin := time.Now()
			res := run(t, s, Request{Command: freezeChild(bys, false), Timeout: timeout, OnEvent: w.on})
			took := time.Since(begin)
			t.Logf("took %v; kill %+v; stderr %q", took, res.Kill, res.Stderr)
			if bound := timeout + grace + 2*time.Second; took > bound {
				t.Errorf("Result after %v, want ≤ %v", took, bound)
			}
			alive, _ := w.alive()
			if len(alive) != 1 {
				t.Fatalf("alive after the Result: %v, want the frozen child", alive)
			}
			// On cgroup1 the child left the freezer leaf: an escapee,
			// counted once by the kill and the pipe-holder scans alike.
			// Elsewhere it stayed in the containment (cgroup2) or the
			// process group (pgroup).
			escapees := map[killtree.Tier]int{killtree.TierCgroup1: 1}[tier]
			if res.Kill.Survivors != 1 || res.Kill.Escapees != escapees {
				t.Errorf("kill %+v, want 1 survivor and %d escapees", res.Kill, escapees)
			}
			lines := strings.Split(res.Stderr, "\n")
			note := lines[len(lines)-1]
			if want := fmt.Sprintf("pid %d (sleep)", alive[0]); !strings.Contains(note, want) || !strings.Contains(note, "still alive") {
				t.Errorf("note %q does not name %s as still alive", note, want)
			}
			if strings.Contains(note, "killed its process tree") {
				t.Errorf("note %q says the tree was killed", note)
			}
			b, err := json.Marshal(res.Kill)
			if err != nil || !strings.Contains(string(b), `"survivors":1`) {
				t.Errorf("kill JSON %s, %v", b, err)
			}
			// Thawed from outside, the survivor acts on its pending SIGKILL.
			if err := os.WriteFile(filepath.Join(bys, "freezer.state"), []byte("THAWED"), 0); err != nil {
				t.Fatal(err)
			}
			w.reapDead(t)
		})
	}
}

// TestRunLingeringEscapee: the shell exits and leaves a child that moved
// itself out of the containment (a root command). It is counted as
// lingering (and as an escapee), and the note says so.
func TestRunLingeringEscapee(t *testing.T) {
	safety := proctest.Safe(t, 4096)
	for _, tier := range []killtree.Tier{killtree.TierCgroup2, killtree.TierCgroup1} {
		mig := safety.Dir("")
		if tier == killtree.TierCgroup1 {
			mig = safety.Dir("freezer")
		}
		if mig == "" || !workingTier(tier, safety.Name()) {
			continue
		}
		t.Run(string(tier), func(t *testing.T) {
			s := newSup(t, Config{Containment: killtree.Config{Tier: tier, CgroupParent: safety.Name()}})
			w := newWatcher(t)
			cmd := `(echo $BASHPID > ` + mig + `/cgroup.procs && exec sleep 30) & c=$!
until grep -qx $c ` + mig + `/cgroup.procs; do sleep 0.01; done
echo pid $c`
			res := run(t, s, Request{Command: cmd, OnEvent: w.on})
			t.Logf("kill %+v; stderr %q", res.Kill, res.Stderr)
			if alive, n := w.alive(); n != 1 || len(alive) > 0 {
				t.Errorf("watched %d, alive after the Result: %v", n, alive)
			}
			if res.Kill.Lingering != 1 || res.Kill.Escapees != 1 || res.Kill.Survivors != 0 {
				t.Errorf("kill %+v, want 1 lingering, 1 escapee", res.Kill)
			}
			if !strings.Contains(res.Stderr, "left 1 process running; it was killed") {
				t.Errorf("stderr %q lacks the lingering note", res.Stderr)
			}
		})
	}
}

func workingTier(tier killtree.Tier, parent string) bool {
	for _, st := range killtree.Doctor(killtree.Config{CgroupParent: parent}) {
		if st.Tier == tier {
			return st.Works
		}
	}
	return false
}

// bystander makes v1 freezer cgroup dir and starts in it a process of no
// tree; the cleanup thaws the cgroup, ends the process and removes dir.
func bystander(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	argv, env := proctest.Argv("sleep", "60")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for unix.Rmdir(dir) != nil && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond) // polling a condition: the cgroup empties
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunFrozenShell: the shell itself moves into a freezer cgroup that
// also holds a bystander and freezes it. The Result still comes within
// timeout + grace + 2 s and names the shell as a survivor.
func TestRunFrozenShell(t *testing.T) {
	proctest.Heavy(t)
	safety := proctest.Safe(t, 4096)
	fz := safety.Dir("freezer")
	if fz == "" {
		t.Skip("no v1 freezer hierarchy")
	}
	const timeout, grace = 3 * time.Second, 300 * time.Millisecond // the timeout leaves the script time to freeze under load
	for _, tier := range tiers(t) {
		t.Run(string(tier), func(t *testing.T) {
			s := newSup(t, Config{Grace: grace, Containment: killtree.Config{Tier: tier, CgroupParent: safety.Name()}})
			bys := bystander(t, filepath.Join(fz, "bystander-shell-"+string(tier)))
			w := newWatcher(t)
			cmd := `echo pid $$; echo $$ > ` + bys + `/cgroup.procs && echo FROZEN > ` + bys + `/freezer.state; echo thawed`
			begin := time.Now()
			res := run(t, s, Request{Command: cmd, Timeout: timeout, OnEvent: w.on})
			took := time.Since(begin)
			t.Logf("took %v; kill %+v; stderr %q", took, res.Kill, res.Stderr)
			if bound := timeout + grace + 2*time.Second; took > bound {
				t.Errorf("Result after %v, want ≤ %v", took, bound)
			}
			alive, _ := w.alive()
			if len(alive) != 1 || res.Kill.Survivors != 1 {
				t.Fatalf("alive %v, kill %+v; want the shell as the one survivor", alive, res.Kill)
			}
			if want := fmt.Sprintf("pid %d (bash)", alive[0]); !strings.Contains(res.Stderr, want) {
				t.Errorf("stderr %q does not name %s", res.Stderr, want)
			}
			if !res.TimedOut || res.ExitCode != nil {
				t.Errorf("timedOut %v exit %v", res.TimedOut, res.ExitCode)
			}
			if err := os.WriteFile(filepath.Join(bys, "freezer.state"), []byte("THAWED"), 0); err != nil {
				t.Fatal(err)
			}
			w.reapDead(t)
		})
	}
}

// TestRunCancelDuringGrace: a caller that cancels while a timed-out
// command's grace runs (what `corral run` does on SIGTERM) ends the grace
// at once; the tree is killed and the Result comes without waiting it out.
func TestRunCancelDuringGrace(t *testing.T) {
	t.Parallel()
	const timeout, grace = time.Second, 20 * time.Second
	s := newSup(t, Config{Grace: grace})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(timeout+500*time.Millisecond, cancel)
	begin := time.Now()
	res, err := s.Run(ctx, marked(t, Request{Command: "trap '' TERM; sleep 60", Timeout: timeout}))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	t.Logf("took %v; kill %+v", took, res.Kill)
	if took > timeout+500*time.Millisecond+2*time.Second {
		t.Errorf("Result after %v: the grace (%v) was not cut short", took, grace)
	}
	if !res.TimedOut || res.Signal != "SIGKILL" || res.Kill.Survivors != 0 {
		t.Errorf("timedOut %v signal %q kill %+v", res.TimedOut, res.Signal, res.Kill)
	}
}
