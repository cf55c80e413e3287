package killtree

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"golang.org/x/sys/unix"
)

// startHangingSupervisor runs the supervise helper in hang mode in the safety
// cgroup: it starts script under tier and prints "running" once the tree has
// members processes. It returns the helper, already past "running", and
// the PID of its watchdog (0 if none). The helper's CgroupParent is
// "/<safety>", taken from the hierarchies' root: its instance is then a
// sibling of this process's instances under the safety cgroup, where this
// process's New sweeps. (A relative one would nest its instance in its own
// cgroup, the safety cgroup, where only a corral started there sweeps:
// TestStaleSweepNested.)
func startHangingSupervisor(t *testing.T, safety *proctest.Safety, mode string, tier Tier, entry, script, members string) (*exec.Cmd, int) {
	t.Helper()
	return startHangingSupervisorIn(t, safety, "/"+safety.Name(), mode, tier, entry, script, members)
}

// startHangingSupervisorIn is startHangingSupervisor with the helper's
// CgroupParent.
func startHangingSupervisorIn(t *testing.T, safety *proctest.Safety, parent, mode string, tier Tier, entry, script, members string) (*exec.Cmd, int) {
	t.Helper()
	argv, henv := proctest.Argv("supervise", mode, string(tier), parent, script, members)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), henv, entry)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := safety.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	var wd int
	if _, serr := fmt.Sscanf(line, "running %d", &wd); err != nil || serr != nil {
		t.Fatalf("helper said %q, %v", line, err)
	}
	return cmd, wd
}

// crashScript starts escapers and a plain sleeper, all marked.
func crashScript() string {
	return proctest.Command("escaper", lifetime) + "; " + proctest.Command("sleep", lifetime) + " & echo ready; wait"
}

// TestSupervisorKilled: a supervisor SIGKILLed in the middle of a command
// leaves no process of the command alive within 1 s (the watchdog), for
// every tier.
func TestSupervisorKilled(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range workingTiers(t, safety.Name()) {
		t.Run(string(tier), func(t *testing.T) {
			entry, marker := proctest.Marker(t)
			sup, wd := startHangingSupervisor(t, safety, "hang", tier, entry, crashScript(), "4")
			before := proctest.AtLeast(marker, 4, 5*time.Second, nil)
			if len(before) < 4 {
				t.Fatalf("%d marked processes before the crash, want ≥ 4", len(before))
			}
			defer reapOrphans(t, wd)
			if err := sup.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = sup.Wait() // killed by the test
			proctest.NoSurvivors(t, marker, time.Second)
			waitGone(t, instanceLeaves(safety.Name()), time.Second)
		})
	}
}

// TestStaleSweep: without a watchdog a crashed supervisor's command survives
// (the control), and the next New kills it and removes its cgroups.
func TestStaleSweep(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			if !tierWorks(safety.Name(), tier) {
				t.Skipf("tier %s does not work here", tier)
			}
			entry, marker := proctest.Marker(t)
			sup, _ := startHangingSupervisor(t, safety, "hang-nowatchdog", tier, entry, crashScript(), "4")
			if err := sup.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = sup.Wait() // killed by the test
			// Reap the orphans even when the control fails, so that
			// their zombies do not fail the tests after this one.
			defer reapOrphans(t, 0)
			// A process in the middle of an exec shows no environment for
			// a moment, so the oracle may miss it: look for a second.
			before := proctest.AtLeast(marker, 4, time.Second, nil)
			if len(before) < 4 {
				t.Fatalf("control: %d marked processes survived the crash without a watchdog, want ≥ 4: %v", len(before), before)
			}
			leaves := instanceLeaves(safety.Name())
			if len(leaves) == 0 {
				t.Fatal("control: no stale leaf left behind")
			}
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name()})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			proctest.NoSurvivors(t, marker, 0)
			waitGone(t, leaves, 0)
		})
	}
}

// TestStaleSweepNested: a supervisor in a cgroup of its own (the safety
// cgroup, as a container or a service would be) nests its containments
// beneath it. Crashed without a watchdog, its leaves are found and swept by
// the next corral started in that same cgroup, and not by a corral living
// elsewhere (this test process, at the root), which sweeps only beneath its
// own cgroup (issue 16, item 5).
func TestStaleSweepNested(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			if !tierWorks(safety.Name(), tier) {
				t.Skipf("tier %s does not work here", tier)
			}
			for _, root := range findMounts().roots() {
				if findMounts().own[root] != "/" {
					t.Skipf("this test process is not in the root cgroup of %s", root)
				}
			}
			entry, marker := proctest.Marker(t)
			sup, _ := startHangingSupervisorIn(t, safety, safety.Name(), "hang-nowatchdog", tier, entry, crashScript(), "4")
			nested := filepath.Join(safety.Name(), safety.Name()) // <safety cgroup>/<its CgroupParent>
			leaves := instanceLeaves(nested)
			if len(leaves) == 0 {
				t.Fatalf("no leaf beneath the supervisor's own cgroup %s", nested)
			}
			if err := sup.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = sup.Wait() // killed by the test
			defer reapOrphans(t, 0)
			// A corral living elsewhere does not sweep it.
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name()})
			if err != nil {
				t.Fatal(err)
			}
			_ = m.Close()
			for _, l := range leaves {
				if !fileExists(l) {
					t.Errorf("a corral outside the dead supervisor's cgroup swept its leaf %s", l)
				}
			}
			// The next corral in the same cgroup does.
			runSupervisor(t, safety, entry, "kill", string(tier), safety.Name(), "echo ready", "0")
			proctest.NoSurvivors(t, marker, time.Second)
			waitGone(t, leaves, time.Second)
		})
	}
}

// reapOrphans reaps the crashed supervisor's orphans, which were reparented
// to this test process (a child subreaper) and which nothing else would reap,
// once the watchdog (wd, 0 for none) has finished. It runs after
// NoSurvivors, while no other test runs (crash tests are not parallel), so
// every zombie child of ours that no Manager owns is such an orphan. A
// killed orphan becomes our zombie only at the end of its exit, after it
// left every list a test checks (its environment, its cgroup), so the
// reaping goes on until no new zombie came for 200 ms.
func reapOrphans(t *testing.T, wd int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	quiet := time.Now()
	for {
		for _, z := range proctest.Zombies(os.Getpid()) {
			if _, own := ownChildren.Load(z.PID); own {
				continue
			}
			var ws unix.WaitStatus
			_, _ = unix.Wait4(z.PID, &ws, unix.WNOHANG, nil)
			quiet = time.Now()
			if z.PID == wd {
				wd = 0
			}
		}
		if wd == 0 && time.Since(quiet) >= 200*time.Millisecond || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a condition: the watchdog, or an orphan's exit, is still at work
	}
}

func tierWorks(parent string, tier Tier) bool {
	for _, s := range Doctor(Config{CgroupParent: parent}) {
		if s.Tier == tier {
			return s.Works
		}
	}
	return false
}

// instanceLeaves lists the leaf directories of instances other than this
// process's under parent, in every hierarchy.
func instanceLeaves(parent string) []string {
	var out []string
	for _, root := range findMounts().roots() {
		insts, _ := filepath.Glob(filepath.Join(root, parent, "*-*"))
		for _, inst := range insts {
			if filepath.Base(inst) == instance() {
				continue
			}
			leaves, _ := os.ReadDir(inst)
			for _, l := range leaves {
				if l.IsDir() && !strings.HasPrefix(l.Name(), "selftest") {
					out = append(out, filepath.Join(inst, l.Name()))
				}
			}
		}
	}
	return out
}

// waitGone polls until every directory is gone, for at most within.
func waitGone(t *testing.T, dirs []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, d := range dirs {
		for {
			_, err := os.Stat(d)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cgroup %s still there after %v", d, within)
				break
			}
			time.Sleep(10 * time.Millisecond) // polling a condition
		}
	}
}

// TestRunningManagerSweeps: a Manager that was running when a sibling
// instance died without its watchdog ends that instance's command and
// removes its cgroups from Start within staleEvery (shortened here), not
// only at the next New (issue 12, item 5).
func TestRunningManagerSweeps(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	if !tierWorks(safety.Name(), TierCgroup2) {
		t.Skip("tier cgroup2 does not work here")
	}
	defer func(d time.Duration) { staleEvery = d }(staleEvery)
	staleEvery = 100 * time.Millisecond
	m, err := New(Config{Tier: TierCgroup2, CgroupParent: safety.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	entry, marker := proctest.Marker(t)
	sup, _ := startHangingSupervisor(t, safety, "hang-nowatchdog", TierCgroup2, entry, crashScript(), "4")
	if err := sup.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = sup.Wait() // killed by the test
	defer reapOrphans(t, 0)
	leaves := instanceLeaves(safety.Name())
	if len(leaves) == 0 {
		t.Fatal("control: no stale leaf left behind")
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(proctest.Survivors(marker)) > 0 && time.Now().Before(deadline) {
		if err := spawnTrue(m, trueBinary()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // one Start every 50 ms, as a server would
	}
	proctest.NoSurvivors(t, marker, 0)
	settle(m)
	waitGone(t, leaves, time.Second)
}

// TestWatchdogIsThisBinary: the watchdog is this binary re-executed
// (/proc/self/exe, argv[0] corral-watchdog), not a shell: it runs the same
// Go sweep as the stale sweep. A sole-tree Manager on pgroup starts none.
func TestWatchdogIsThisBinary(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want bool
	}{
		{Config{Tier: TierPgroup, CgroupParent: safety.Name()}, true},                  // a server on pgroup: guards its tags
		{Config{Tier: TierPgroup, CgroupParent: safety.Name(), SoleTree: true}, false}, // the CLI on pgroup: nothing to guard
		{Config{Tier: TierCgroup2, CgroupParent: safety.Name(), SoleTree: true}, true}, // the CLI on cgroup2: its leaf
	} {
		if c.cfg.Tier != TierPgroup && !tierWorks(safety.Name(), c.cfg.Tier) {
			continue
		}
		m, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.plat.awaitSetup(); err != nil {
			t.Fatal(err)
		}
		wd := m.plat.wd
		if (wd != nil) != c.want {
			t.Errorf("%+v: watchdog %v, want %v", c.cfg, wd != nil, c.want)
		}
		if wd != nil {
			// Start returns once the exec began: the kernel sets the new
			// image's argument area a moment later, and until then
			// /proc/PID/cmdline reads empty. Wait for it, briefly.
			var cmdline string
			for deadline := time.Now().Add(5 * time.Second); cmdline == "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				cmdline = readFileOr(fmt.Sprintf("/proc/%d/cmdline", wd.cmd.Process.Pid))
			}
			exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", wd.cmd.Process.Pid))
			if err != nil || exe != self || !strings.HasPrefix(cmdline, watchdogArg0+"\x00") {
				t.Errorf("watchdog runs %q (%v) as %q, want %s as %s", exe, err, cmdline, self, watchdogArg0)
			}
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestWatchdogStartFails: New starts the watchdog beside the rest of its
// setup. When that start fails, a server's New fails; a sole-tree
// Manager's (the CLI's) New returns and its first Start fails with the
// reason, starting nothing, and Close leaves no directory behind. No
// command ever runs unguarded.
func TestWatchdogStartFails(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	if !tierWorks(safety.Name(), TierCgroup2) {
		t.Skip("needs a writable cgroup2 hierarchy")
	}
	old := watchdogPath
	watchdogPath = filepath.Join(t.TempDir(), "no-such-binary")
	defer func() { watchdogPath = old }()

	if m, err := New(Config{Tier: TierCgroup2, CgroupParent: safety.Name()}); err == nil || !strings.Contains(err.Error(), "watchdog") {
		if m != nil {
			_ = m.Close()
		}
		t.Errorf("a server's New with a watchdog that cannot start: %v, want its error", err)
	}

	m, err := New(Config{Tier: TierCgroup2, CgroupParent: safety.Name(), SoleTree: true})
	if err != nil {
		t.Fatalf("a sole-tree New: %v, want the error at Start", err)
	}
	entry, marker := proctest.Marker(t)
	defer proctest.NoSurvivors(t, marker, 0)
	cmd := exec.Command("sleep", "100")
	cmd.Env = append(os.Environ(), entry)
	tr, err := m.Start(cmd)
	if err == nil || !strings.Contains(err.Error(), "watchdog") {
		if tr != nil {
			_, _ = tr.Kill()
			_ = cmd.Wait()
			_ = tr.Close()
		}
		t.Errorf("Start with no watchdog: %v, want the watchdog's error", err)
	}
	if cmd.Process != nil {
		t.Errorf("Start with no watchdog started the command (pid %d)", cmd.Process.Pid)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
	for _, d := range m.plat.mnt.instanceDirs(safety.Name(), m.plat.instance) {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s is left after Close", d)
		}
	}
}

// TestCloseReapsWatchdog: Close, a sole-tree Manager's too (the CLI's),
// returns with its watchdog killed and reaped: a corral run that exited
// before would leave the zombie to its caller, and a caller that is a child
// subreaper (a supervisor, as corral is) would then hold it.
func TestCloseReapsWatchdog(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, cfg := range []Config{
		{Tier: TierPgroup, CgroupParent: safety.Name()},                  // a server
		{Tier: TierCgroup2, CgroupParent: safety.Name(), SoleTree: true}, // the CLI
	} {
		if cfg.Tier != TierPgroup && !tierWorks(safety.Name(), cfg.Tier) {
			continue
		}
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.plat.awaitSetup(); err != nil {
			t.Fatal(err)
		}
		pid := m.plat.wd.cmd.Process.Pid
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if st, ok := readStat(pid, make([]byte, 1024)); ok {
			t.Errorf("%+v: the watchdog %d exists after Close (state %c), want it reaped", cfg, pid, st.state)
		}
	}
}
