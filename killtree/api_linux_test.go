package killtree

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

func TestForcedTierUnavailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tier   Tier
		reason string
	}{
		// A tier of another OS names why it does not work.
		{name: "job on linux", tier: TierJob, reason: "Windows only"},
		// An unknown name is an error too, never a silent fallback.
		{name: "unknown", tier: "cgroup3", reason: "unknown tier"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(Config{Tier: tc.tier})
			if err == nil {
				m.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("err = %v, want ErrUnavailable naming %q", err, tc.reason)
			}
		})
	}
}

func TestForcedByEnvironment(t *testing.T) {
	t.Setenv(EnvContainment, "pgroup")
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Tier() != TierPgroup {
		t.Errorf("tier %s, want pgroup", m.Tier())
	}
	t.Setenv(EnvContainment, "job")
	if _, err := New(Config{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("forced job through %s: err %v, want ErrUnavailable", EnvContainment, err)
	}
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	st := Doctor(Config{})
	var tiers []Tier
	chosen := 0
	for _, s := range st {
		tiers = append(tiers, s.Tier)
		if s.Reason == "" {
			t.Errorf("%s: empty reason", s.Tier)
		}
		if s.Chosen {
			chosen++
			if !s.Works {
				t.Errorf("%s chosen but does not work", s.Tier)
			}
		}
	}
	if want := []Tier{TierCgroup2, TierCgroup1, TierPgroup, TierJob}; !slicesEqual(tiers, want) {
		t.Errorf("tiers %v, want %v", tiers, want)
	}
	if chosen != 1 {
		t.Errorf("%d tiers chosen, want 1: %+v", chosen, st)
	}
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, s := range st {
		if s.Chosen && s.Tier != m.Tier() {
			t.Errorf("Doctor chose %s, New chose %s", s.Tier, m.Tier())
		}
		if s.Tier == TierPgroup && !s.Works {
			t.Errorf("pgroup does not work: %s", s.Reason)
		}
	}
}

func slicesEqual(a, b []Tier) bool {
	return strings.Join(tierStrings(a), ",") == strings.Join(tierStrings(b), ",")
}

func tierStrings(ts []Tier) []string {
	var out []string
	for _, t := range ts {
		out = append(out, string(t))
	}
	return out
}

// TestKillSeq pins the kernel fact behind single-use cgroups and the
// promise built on it: a fresh leaf always works, even right after a
// sibling was killed, while a once-killed leaf may kill its next child at
// birth (kernel 6.18, docs/killtree.md E6b).
func TestKillSeq(t *testing.T) {
	if !tierWorks("corral", TierCgroup2) {
		t.Skip("cgroup2 tier does not work here")
	}
	mnt := findMounts()
	cfg := Config{}.withDefaults()
	first, err := newCgroup2(mnt, cfg, instance(), "killseq-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.destroy()
	if err := selfTest(first); err != nil {
		t.Fatalf("fresh leaf: %v", err)
	}
	bug := killSeqBug(first) // kills the leaf and clones into it again
	t.Logf("kernel kills a child cloned into a once-killed cgroup: %v", bug)
	if err := first.start(exec.Command(trueBinary())); err == nil {
		t.Error("a containment started a second command")
	}
	second, err := newCgroup2(mnt, cfg, instance(), "killseq-b", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.destroy()
	if err := selfTest(second); err != nil {
		t.Fatalf("fresh leaf after a killed sibling: %v", err)
	}
	var mentioned bool
	for _, s := range Doctor(Config{}) {
		if s.Tier == TierCgroup2 {
			mentioned = strings.Contains(s.Reason, "kill_seq")
		}
	}
	if mentioned != bug {
		t.Errorf("Doctor mentions kill_seq: %v, probe found the bug: %v", mentioned, bug)
	}
}

// TestStartFailure: a command that cannot start leaves no containment.
func TestStartFailure(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range workingTiers(t, safety.Name()) {
		t.Run(string(tier), func(t *testing.T) {
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name()})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			fds := fdCount(t, m)
			if _, err := m.Start(exec.Command(filepath.Join(t.TempDir(), "missing"))); err == nil {
				t.Fatal("Start of a missing binary succeeded")
			}
			if got := fdCount(t, m); got != fds {
				t.Errorf("fd count %d, want %d", got, fds)
			}
			// Close removes the containment prepared for the next command
			// and the instance directory, not a leaf a failed Start left.
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			for _, root := range findMounts().roots() {
				leaves, _ := filepath.Glob(filepath.Join(root, safety.Name(), instance(), "[0-9]*"))
				if len(leaves) > 0 {
					t.Errorf("leaves left: %v", leaves)
				}
			}
		})
	}
}

// TestConcurrentTrees starts many short trees at once and checks that every
// leader's exit status reaches its own cmd.Wait: no tree reaps another
// tree's leader or steals os/exec's status (docs/killtree.md E12).
func TestConcurrentTrees(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	entry, marker := proctest.Marker(t)
	defer proctest.NoSurvivors(t, marker, 0)
	for _, tier := range workingTiers(t, safety.Name()) {
		t.Run(string(tier), func(t *testing.T) {
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name()})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command("bash", "-c", "("+proctest.Command("sleep", lifetime)+" &); exit 3")
					cmd.Env = append(os.Environ(), entry)
					tr, err := m.Start(cmd)
					if err != nil {
						t.Errorf("tree %d: Start: %v", i, err)
						return
					}
					<-tr.Exited()
					if _, err := tr.Kill(); err != nil {
						t.Errorf("tree %d: Kill: %v", i, err)
					}
					err = cmd.Wait()
					var ee *exec.ExitError
					if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).ExitStatus() != 3 {
						t.Errorf("tree %d: Wait = %v, want exit status 3", i, err)
					}
					if err := tr.Close(); err != nil {
						t.Errorf("tree %d: Close: %v", i, err)
					}
				}()
			}
			wg.Wait()
		})
	}
	if z := proctest.Zombies(os.Getpid()); len(z) > 0 {
		t.Errorf("zombies: %v", z)
	}
}

func TestParseCgroupFile(t *testing.T) {
	text := "12:pids:/corral/1-2/3\n11:cpu,cpuacct:/user.slice\n1:name=systemd:/init.scope\n0::/unified/x\n\nbroken\n"
	got := parseCgroupFile(text)
	want := map[string]string{"pids": "/corral/1-2/3", "cpu": "/user.slice", "cpuacct": "/user.slice", "name=systemd": "/init.scope"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestExitedClosedByClose: a tree closed while its leader runs (Close kills
// it) closes Exited too, so that whoever waits on it is released.
func TestExitedClosedByClose(t *testing.T) {
	for _, tier := range workingTiers(t, "") {
		t.Run(string(tier), func(t *testing.T) {
			m, err := New(Config{Tier: tier})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			entry, marker := proctest.Marker(t)
			cmd := exec.Command("bash", "-c", proctest.Command("sleep", lifetime))
			cmd.Env = append(os.Environ(), entry)
			tr, err := m.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-tr.Exited():
			case <-time.After(5 * time.Second):
				t.Fatal("Exited still open after Close")
			}
			_ = cmd.Wait() // killed by Close
			proctest.NoSurvivors(t, marker, time.Second)
		})
	}
}

// TestProcsFresh: the cgroup tiers' procs reads what the cgroup holds now:
// the PID of a child just reaped is gone from the very next read. It guards
// against keeping cgroup.procs open to save the open: on v1 such a file's
// reads come from a pidlist cached for a second (see cgroup1.procs).
func TestProcsFresh(t *testing.T) {
	mnt := findMounts()
	cfg := Config{}.withDefaults()
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			if !tierWorks("corral", tier) {
				t.Skipf("%s tier does not work here", tier)
			}
			var c containment
			var err error
			if tier == TierCgroup2 {
				c, err = newCgroup2(mnt, cfg, instance(), "fresh-"+newID(), nil)
			} else {
				c, err = newCgroup1(mnt, cfg, instance(), "fresh-"+newID(), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.destroy()
			cmd := exec.Command("sleep", lifetime)
			if err := c.start(cmd); err != nil {
				t.Fatal(err)
			}
			if pids, err := c.procs(); err != nil || !slices.Equal(pids, []int{cmd.Process.Pid}) {
				t.Errorf("procs = %v, %v; want [%d]", pids, err, cmd.Process.Pid)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait() // reaped: killed, as it should be
			if pids, err := c.procs(); err != nil || len(pids) != 0 {
				t.Errorf("procs right after the reap = %v, %v; want none", pids, err)
			}
		})
	}
}
