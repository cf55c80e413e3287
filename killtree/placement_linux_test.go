package killtree

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestPlace: the supervisor's own cgroups come from /proc/self/cgroup per
// hierarchy, and a relative CgroupParent is placed beneath them, an
// absolute one beneath the root.
func TestPlace(t *testing.T) {
	m := &mounts{v2: "/cg/unified", v2ctrl: map[string]bool{},
		v1: map[string]string{"freezer": "/cg/freezer", "pids": "/cg/pids", "memory": "/cg/memory", "cpu": "/cg/cpu", "cpuacct": "/cg/cpu"}}
	m.own = ownCgroups(m, "9:name=systemd:/\n8:pids:/corral/1-2/3\n6:freezer:/corral/1-2/3\n4:memory:/process_api/x\n2:cpu,cpuacct:/\n0::/corral/1-2/3\n")
	for _, tc := range []struct {
		root, rel, place, path string
		nested                 bool
	}{
		// an inner corral in an outer one's leaf
		{"/cg/freezer", "corral/4-5/6", "/cg/freezer/corral/1-2/3/corral/4-5/6", "/corral/1-2/3/corral/4-5/6", true},
		{"/cg/unified", "corral", "/cg/unified/corral/1-2/3/corral", "/corral/1-2/3/corral", true},
		{"/cg/pids", "corral/4-5", "/cg/pids/corral/1-2/3/corral/4-5", "/corral/1-2/3/corral/4-5", true},
		// a container's memory cgroup
		{"/cg/memory", "corral/4-5/6", "/cg/memory/process_api/x/corral/4-5/6", "/process_api/x/corral/4-5/6", true},
		// at the root: where leaves went before nesting
		{"/cg/cpu", "corral/4-5/6", "/cg/cpu/corral/4-5/6", "/corral/4-5/6", false},
		// an absolute parent opts out
		{"/cg/freezer", "/corral/4-5/6", "/cg/freezer/corral/4-5/6", "/corral/4-5/6", false},
	} {
		if got := m.place(tc.root, tc.rel); got != tc.place {
			t.Errorf("place(%s, %s) = %s, want %s", tc.root, tc.rel, got, tc.place)
		}
		if got := m.cgroupPath(tc.root, tc.rel); got != tc.path {
			t.Errorf("cgroupPath(%s, %s) = %s, want %s", tc.root, tc.rel, got, tc.path)
		}
		if got := m.nested(tc.root, tc.rel); got != tc.nested {
			t.Errorf("nested(%s, %s) = %v, want %v", tc.root, tc.rel, got, tc.nested)
		}
	}
	// A host without a v2 line (pure v1 kernel view) is at the v2 root.
	if own := ownCgroups(m, "6:freezer:/a\n"); own["/cg/unified"] != "/" || own["/cg/pids"] != "/" || own["/cg/freezer"] != "/a" {
		t.Errorf("ownCgroups without a v2 line: %v", own)
	}
	// This process: its own cgroups name every hierarchy killtree uses.
	mnt := findMounts()
	for _, root := range mnt.roots() {
		if !strings.HasPrefix(mnt.own[root], "/") {
			t.Errorf("own cgroup in %s: %q", root, mnt.own[root])
		}
	}
}

// helperLeaveHome moves itself out of its own v2 cgroup into the leaf
// <own>/corral/<instance>/supervisor (leaveHome) and prints "moved <its v2
// cgroup>", or "refused <error>".
func helperLeaveHome(args []string) int {
	mnt := findMounts()
	if mnt.v2 == "" {
		fmt.Println("refused no cgroup2")
		return 0
	}
	// "watchdog": a child registered as a watchdog shares the cgroup and
	// must move along.
	var wd *exec.Cmd
	if len(args) > 0 && args[0] == "watchdog" {
		wd = exec.Command("sleep", "30")
		if err := wd.Start(); err != nil {
			fmt.Println("refused", err)
			return 0
		}
		ownChildren.Store(wd.Process.Pid, struct{}{})
		defer func() { _ = wd.Process.Kill(); _ = wd.Wait() }()
	}
	home := mnt.place(mnt.v2, "")
	if _, err := leaveHome(home, mnt.place(mnt.v2, filepath.Join("corral", instance()))); err != nil {
		fmt.Println("refused", errors.Is(err, ErrUnavailable), err)
		return 0
	}
	line := "moved " + ownCgroups(mnt, readFileOr("/proc/self/cgroup"))[mnt.v2]
	if wd != nil {
		line += " watchdog " + ownCgroups(mnt, readFileOr(fmt.Sprintf("/proc/%d/cgroup", wd.Process.Pid)))[mnt.v2]
	}
	fmt.Println(line)
	return 0
}

// runLeaveHome runs the leavehome helper in the safety cgroups and returns
// its line.
func runLeaveHome(t *testing.T, safety *proctest.Safety, args ...string) string {
	t.Helper()
	argv, henv := proctest.Argv("leavehome", args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), henv)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := safety.Start(cmd); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if err := cmd.Wait(); err != nil {
		t.Fatalf("leavehome helper: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestLeaveHome: on cgroup v2, a supervisor alone in its own cgroup moves
// itself into a leaf of its own so that controllers can be enabled there
// (the no-internal-process rule); one that shares its cgroup with another
// process refuses, moving nobody. This host's v2 hierarchy may have no
// controller to enable; the move itself is tested.
func TestLeaveHome(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	if safety.Dir("") == "" {
		t.Skip("no writable cgroup2 hierarchy")
	}
	got := runLeaveHome(t, safety)
	want := "/" + safety.Name() + "/corral/"
	if !strings.HasPrefix(got, "moved "+want) || !strings.HasSuffix(got, "/"+supervisorLeaf) {
		t.Errorf("alone in its cgroup: %q, want moved %s<instance>/%s", got, want, supervisorLeaf)
	}
	// With its watchdog beside it (started before any containment): both move.
	got = runLeaveHome(t, safety, "watchdog")
	if f := strings.Fields(got); len(f) != 4 || f[0] != "moved" || f[2] != "watchdog" || f[1] != f[3] ||
		!strings.HasSuffix(f[1], "/"+supervisorLeaf) {
		t.Errorf("with its watchdog: %q, want both moved into the same %s leaf", got, supervisorLeaf)
	}

	// Another process in the same cgroup: no move.
	entry, marker := proctest.Marker(t)
	argv, henv := proctest.Argv("sleep", lifetime)
	other := exec.Command(argv[0], argv[1:]...)
	other.Env = append(os.Environ(), henv, entry)
	if err := safety.Start(other); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait(); proctest.NoSurvivors(t, marker, 0) }()
	if got := runLeaveHome(t, safety); !strings.HasPrefix(got, "refused true") {
		t.Errorf("sharing its cgroup: %q, want refused (ErrUnavailable)", got)
	}
	if pids, _ := readPids(filepath.Join(safety.Dir(""), "cgroup.procs")); len(pids) != 1 || pids[0] != other.Process.Pid {
		t.Errorf("the other process was moved: %s holds %v", safety.Dir(""), pids)
	}
}

// TestSweepSparesSupervisorLeaf: the stale sweep kills a dead instance's
// leaves but not what its supervisor leaf holds, and removes that leaf and
// the instance once it is empty.
func TestSweepSparesSupervisorLeaf(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	mnt := findMounts()
	if safety.Dir("") == "" || mnt.own[mnt.v2] != "/" {
		t.Skip("needs a writable cgroup2 hierarchy and this process at its root")
	}
	entry, marker := proctest.Marker(t)
	defer proctest.NoSurvivors(t, marker, 0)
	inst := filepath.Join(safety.Dir(""), "999999999-1") // above any pid_max: a dead owner
	leaf, sup := sleepInV2Leaf(t, filepath.Join(inst, "7"), entry), sleepInV2Leaf(t, filepath.Join(inst, supervisorLeaf), entry)
	done := make(chan error, 1)
	go func() { done <- leaf.Wait() }()
	sweepStale(mnt, safety.Name())
	if err := <-done; err == nil {
		t.Error("the dead instance's leaf survived the sweep")
	}
	if p, ok := readStat(sup.Process.Pid, make([]byte, 1024)); !ok || p.zombie() {
		t.Error("the sweep killed what the supervisor leaf holds")
	}
	if !fileExists(filepath.Join(inst, supervisorLeaf)) {
		t.Error("the sweep removed a supervisor leaf that holds a process")
	}
	_ = sup.Process.Kill()
	_ = sup.Wait()
	sweepStale(mnt, safety.Name())
	if fileExists(inst) {
		t.Errorf("the sweep left %s once its supervisor leaf was empty", inst)
	}
}

// TestOuterCgroupHoldsLeaves: a supervisor started inside an outer cgroup
// (the safety cgroup, as a container's) makes its command's leaves beneath
// it, so the outer pids.max counts the command and the outer kill ends it:
// cgroup.kill of the outer v2 cgroup on cgroup2, the freeze-kill-thaw loop
// on the outer v1 freezer cgroup on cgroup1. The outer kill also ends the
// supervisor and its watchdog; before nesting (issue 16, item 5) the
// command's leaves were beside the outer cgroup and the command lived on.
func TestOuterCgroupHoldsLeaves(t *testing.T) {
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			// A safety of its own: a cgroup that received cgroup.kill
			// kills what is cloned into it later (see doc.go, "Kernel
			// facts").
			safety := proctest.Safe(t, safetyPids)
			if !tierWorks(safety.Name(), tier) {
				t.Skipf("tier %s does not work here", tier)
			}
			outer, used := safety.Dir(""), []string{"0::", ":pids:"}
			if tier == TierCgroup1 {
				outer, used = safety.Dir("freezer"), []string{":freezer:", ":pids:"}
			}
			if outer == "" {
				t.Skipf("no safety cgroup in the %s hierarchy", tier)
			}
			entry, marker := proctest.Marker(t)
			// The default parent, whose root placement would be outside
			// the safety cgroup.
			sup, wd := startHangingSupervisorIn(t, safety, "corral", "hang", tier, entry,
				proctest.Command("sleep", lifetime)+" & echo ready; wait", "2")
			defer reapOrphans(t, wd)
			// The tree has two members, but the sleeper may be in the
			// middle of its exec, when its environment cannot be read.
			members := proctest.AtLeast(marker, 2, 5*time.Second, func(p proctest.Proc) bool {
				return p.PID == sup.Process.Pid // the supervisor lives in the outer cgroup itself
			})
			var n int
			for _, p := range members {
				n++
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.PID))
				for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
					for _, u := range used {
						if strings.Contains(line, u) && !strings.Contains(line, ":/"+safety.Name()+"/") {
							t.Errorf("%v in %s, not beneath the outer cgroup /%s", p, line, safety.Name())
						}
					}
				}
			}
			if n < 2 {
				t.Fatalf("%d marked processes in the command, want 2", n)
			}
			if tier == TierCgroup2 {
				if err := writeFile(filepath.Join(outer, "cgroup.kill"), "1"); err != nil {
					t.Fatal(err)
				}
			} else if _, err := (&cgroup1{freezer: outer}).kill(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			proctest.NoSurvivors(t, marker, time.Second)
		})
	}
}

// TestBusyCgroup2: the v2 controllers listed in this process's own cgroup
// are usable when it is the root or holds this process alone (it can move
// out), and not when another process shares it (a file tree stands in for
// the cgroup: this host may have no v2 controller).
func TestBusyCgroup2(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "svc"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &mounts{v2: root, own: map[string]string{root: "/svc"}}
	procs := filepath.Join(root, "svc", "cgroup.procs")
	for _, tc := range []struct {
		procs string
		busy  bool
	}{
		{fmt.Sprintf("%d\n", os.Getpid()), false},         // alone: it moves out
		{fmt.Sprintf("1\n%d\n", os.Getpid()), true},       // shared: nobody moves
		{fmt.Sprintf("%d\n4194305\n", os.Getpid()), true}, // shared, listed after it
	} {
		if err := os.WriteFile(procs, []byte(tc.procs), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := m.busyCgroup2(filepath.Join(root, "svc")); (got != "") != tc.busy {
			t.Errorf("cgroup.procs %q: busy %q, want busy %v", tc.procs, got, tc.busy)
		}
	}
	m.own[root] = "/" // the root is exempt, whatever it holds
	if got := m.busyCgroup2(root); got != "" {
		t.Errorf("at the root: busy %q", got)
	}
}

// sleepInV2Leaf makes the v2 cgroup dir and starts a marked sleep helper
// born in it; the test's cleanup kills and reaps it.
func sleepInV2Leaf(t *testing.T, dir, entry string) *exec.Cmd {
	t.Helper()
	if _, err := mkLeaf(dir); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	argv, henv := proctest.Argv("sleep", lifetime)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), henv, entry)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// TestWatchdogSparesSupervisorLeaf: when its supervisor dies, the watchdog
// kills every leaf of the instance but the supervisor's own (leaveHome),
// where the watchdog itself may live.
func TestWatchdogSparesSupervisorLeaf(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	if safety.Dir("") == "" {
		t.Skip("needs a writable cgroup2 hierarchy")
	}
	entry, marker := proctest.Marker(t)
	defer proctest.NoSurvivors(t, marker, 0)
	inst := filepath.Join(safety.Dir(""), "999999999-2")
	leaf, sup := sleepInV2Leaf(t, filepath.Join(inst, "5"), entry), sleepInV2Leaf(t, filepath.Join(inst, supervisorLeaf), entry)
	done := make(chan error, 1)
	go func() { done <- leaf.Wait() }()
	wd, err := startWatchdog("999999999-2", []string{inst})
	if err != nil || wd == nil {
		t.Skipf("no watchdog: %v", err)
	}
	wd.mu.Lock()
	_ = wd.stdin.Close() // EOF: the supervisor is gone
	wd.stdin = nil
	wd.mu.Unlock()
	_ = wd.cmd.Wait()
	ownChildren.Delete(wd.cmd.Process.Pid)
	if err := <-done; err == nil {
		t.Error("the instance's leaf survived its watchdog")
	}
	if p, ok := readStat(sup.Process.Pid, make([]byte, 1024)); !ok || p.zombie() {
		t.Error("the watchdog killed what the supervisor leaf holds")
	}
	_ = sup.Process.Kill() // spared, as it should be: the test's to end
	_ = sup.Wait()
}
