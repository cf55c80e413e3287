package killtree

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
)

// frozenScenario is a root command that freezes, stops or nests part of its
// own tree. Its script prints "pid N" for every process the test watches
// (the test takes a pidfd on each: a marker the command cannot scrub), then
// "ready".
type frozenScenario struct {
	name string
	// only limits the scenario to one tier ("" : every tier).
	only Tier
	// script builds the bash script from the directories it may use.
	script func(d frozenDirs) string
	// escapees is exactly what Report.Escapees must say, per tier.
	escapees map[Tier]int
	// nested is the cgroup the command makes inside its own leaf ("" if
	// none), relative to the leaf: Close must remove it.
	nested string
}

// frozenDirs are the directories a frozen scenario's script uses.
type frozenDirs struct {
	freezer string // the v1 freezer hierarchy's mount point
	v2      string // the cgroup2 mount point
	safety  string // the safety cgroup in the v1 freezer hierarchy
	outside string // a freezer cgroup outside the tree, which the test made and froze
}

// moveFreeze is the script fragment that starts `sleep 60` in cgroup "$f"
// (made first), waits until it is there, freezes "$f" with the file and
// value given, waits until that took, and prints its pid.
func moveFreeze(file, value, frozen string) string {
	return `mkdir -p "$f" || exit 1
(echo $BASHPID > "$f/cgroup.procs" && exec sleep 60) & c=$!
until grep -qx $c "$f/cgroup.procs"; do sleep 0.01; done
echo ` + value + ` > "$f/` + file + `"
until grep -q "` + frozen + `" "$f/` + strings.Replace(file, "cgroup.freeze", "cgroup.events", 1) + `"; do sleep 0.01; done
echo pid $c`
}

func frozenScenarios() []frozenScenario {
	v1Freeze := moveFreeze("freezer.state", "FROZEN", "FROZEN")
	v2Freeze := moveFreeze("cgroup.freeze", "1", "frozen 1")
	all := func(n int) map[Tier]int { return map[Tier]int{TierCgroup2: n, TierCgroup1: n, TierPgroup: n} }
	return []frozenScenario{
		// A child in a v1 freezer cgroup the command made inside its own
		// leaf and froze: the leaf's kill must thaw it.
		{name: "nested-v1-frozen", only: TierCgroup1, nested: "frz", escapees: all(0), script: func(d frozenDirs) string {
			return `f=` + d.freezer + `$(sed -n 's/^[0-9]*:freezer://p' /proc/self/cgroup)/frz
` + v1Freeze + `
echo ready; wait`
		}},
		// The same in cgroup2: a nested cgroup with cgroup.freeze 1.
		{name: "nested-v2-frozen", only: TierCgroup2, nested: "frz", escapees: all(0), script: func(d frozenDirs) string {
			return `f=` + d.v2 + `$(sed -n 's/^0:://p' /proc/self/cgroup)/frz
` + v2Freeze + `
echo ready; wait`
		}},
		// A child moved into a v1 freezer cgroup of the command's own
		// outside the containment, and frozen: it holds only the tree's
		// processes, so the kill thaws it. On cgroup1 the child left the
		// freezer leaf: one escapee.
		{name: "own-v1-freezer-outside", escapees: map[Tier]int{TierCgroup2: 0, TierCgroup1: 1, TierPgroup: 0}, script: func(d frozenDirs) string {
			return `f=` + d.safety + `/frz-$$
` + v1Freeze + `
echo ready; wait`
		}},
		// A child stopped with SIGSTOP: SIGKILL still ends it.
		{name: "sigstop", escapees: all(0), script: func(frozenDirs) string {
			return `sleep 60 & c=$!; kill -STOP $c
until grep -q '^State:.*T' /proc/$c/status; do sleep 0.01; done
echo pid $c; echo ready; wait`
		}},
		// The shell exits; a child it froze in a nested cgroup lingers.
		{name: "nested-v1-frozen-exited", only: TierCgroup1, nested: "frz", escapees: all(0), script: func(d frozenDirs) string {
			return `f=` + d.freezer + `$(sed -n 's/^[0-9]*:freezer://p' /proc/self/cgroup)/frz
` + v1Freeze + `
echo ready`
		}},
	}
}

// TestMatrixFrozen runs the frozen scenarios under every tier that works
// here, inside a safety cgroup: Kill must end every watched process well
// within its deadline, count escapees exactly, and leave no cgroup behind,
// nested ones included.
func TestMatrixFrozen(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	mnt := findMounts()
	if mnt.v1["freezer"] == "" || safety.Dir("freezer") == "" {
		t.Skip("no v1 freezer hierarchy")
	}
	d := frozenDirs{freezer: mnt.v1["freezer"], v2: mnt.v2, safety: safety.Dir("freezer")}
	for _, tier := range workingTiers(t, safety.Name()) {
		t.Run(string(tier), func(t *testing.T) {
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name(), PidsMax: safetyPids})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, sc := range frozenScenarios() {
				if sc.only != "" && sc.only != tier {
					continue
				}
				t.Run(sc.name, func(t *testing.T) { runFrozen(t, m, sc, d) })
			}
			settle(m)
			assertNoLeaves(t, m, safety.Name())
		})
	}
}

// started is a frozen scenario's tree as the test sees it.
type started struct {
	cmd     *exec.Cmd
	tr      *Tree
	out     *os.File
	watched []int // pidfds of the processes the script named
	pids    []int
}

// startFrozen starts sc's script in m, reads its "pid N" lines (taking a
// pidfd on each at once) up to "ready", and registers a cleanup that ends
// everything even when the test fails.
func startFrozen(t *testing.T, m *Manager, script string) *started {
	t.Helper()
	entry, marker := proctest.Marker(t)
	t.Cleanup(func() { proctest.NoSurvivors(t, marker, time.Second) })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), entry)
	cmd.Stdout, cmd.Stderr = w, w
	tr, err := m.Start(cmd)
	w.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr.WatchPipes(rawFd(t, r))
	s := &started{cmd: cmd, tr: tr, out: r}
	t.Cleanup(func() {
		for _, fd := range s.watched {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) // ESRCH: it died, as it should
			unix.Close(fd)
		}
		_, _ = tr.Kill()
		_ = cmd.Wait()
		_ = tr.Close()
		r.Close()
	})
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting for ready: %v (read %q)", err, line)
		}
		line = strings.TrimSpace(line)
		if line == "ready" {
			return s
		}
		if p, ok := strings.CutPrefix(line, "pid "); ok {
			pid, err := strconv.Atoi(p)
			if err != nil {
				t.Fatalf("bad line %q", line)
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				t.Fatalf("pidfd_open %d: %v", pid, err)
			}
			s.watched = append(s.watched, fd)
			s.pids = append(s.pids, pid)
			continue
		}
		t.Logf("script: %s", line)
	}
}

// dead reports whether every watched process has exited (its pidfd is
// readable).
func (s *started) dead() []int {
	var alive []int
	for i, fd := range s.watched {
		if !readable(uintptr(fd)) {
			alive = append(alive, s.pids[i])
		}
	}
	return alive
}

func runFrozen(t *testing.T, m *Manager, sc frozenScenario, d frozenDirs) {
	s := startFrozen(t, m, sc.script(d))
	tr := s.tr
	if len(s.watched) == 0 {
		t.Fatal("the script named no process to watch")
	}
	var nested []string
	if sc.nested != "" {
		for _, dir := range tr.c.dirs() {
			if _, err := os.Stat(filepath.Join(dir, sc.nested)); err == nil {
				nested = append(nested, filepath.Join(dir, sc.nested))
			}
		}
		if len(nested) == 0 {
			t.Fatalf("the script made no cgroup %s in its leaf", sc.nested)
		}
	}
	if strings.HasSuffix(sc.name, "-exited") {
		select {
		case <-tr.Exited():
		case <-time.After(10 * time.Second):
			t.Fatal("shell did not exit")
		}
		if n, err := tr.Members(); err != nil || n < 1 {
			t.Errorf("Members after the exit = %d, %v; want the frozen child", n, err)
		}
	}
	const within = 2 * time.Second
	rep, err := tr.KillBy(time.Now().Add(within))
	t.Logf("%+v", rep)
	if err != nil {
		t.Errorf("KillBy: %v", err)
	}
	if rep.Duration > within {
		t.Errorf("KillBy took %v, deadline %v", rep.Duration, within)
	}
	if alive := s.dead(); len(alive) > 0 {
		t.Errorf("still alive after Kill: %v", alive)
	}
	if rep.Survivors != 0 || len(tr.Survivors()) != 0 {
		t.Errorf("Survivors %d, %v; want none", rep.Survivors, tr.Survivors())
	}
	if want := sc.escapees[tr.Tier()]; rep.Escapees != want {
		t.Errorf("Escapees = %d, want %d", rep.Escapees, want)
	}
	if rep.Processes < len(s.watched) {
		t.Errorf("Processes = %d, want ≥ %d", rep.Processes, len(s.watched))
	}
	_ = s.cmd.Wait()
	if err := drainEOF(s.out); err != nil {
		t.Errorf("pipe: %v", err)
	}
	dirs := tr.c.dirs()
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	settle(m)
	for _, dir := range append(nested, dirs...) {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s still there (%v)", dir, err)
		}
	}
	if z := proctest.Zombies(os.Getpid()); len(z) > 0 {
		t.Errorf("zombies left: %v", z)
	}
}

// assertNoLeaves fails t if any hierarchy holds a directory under m's
// instance directory: every leaf, and every cgroup nested in one, is gone.
func assertNoLeaves(t *testing.T, m *Manager, parent string) {
	t.Helper()
	for _, inst := range m.plat.mnt.instanceDirs(parent, m.plat.instance) {
		ents, err := os.ReadDir(inst)
		if err != nil {
			continue // removed: nothing under it
		}
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), "selftest-") {
				// The prepared containment of the next command is
				// expected; anything else is a leftover.
				if m.plat.prep != nil && slices.Contains(m.plat.prep.spareDirs(), filepath.Join(inst, e.Name())) {
					continue
				}
				t.Errorf("cgroup %s left behind", filepath.Join(inst, e.Name()))
			}
		}
	}
}

// TestKillSurvivor: a child frozen in a freezer cgroup that also holds a
// process outside the tree (a bystander, as in a paused container) is not
// thawed. KillBy gives up at its deadline and names it, Survivors names it
// until it dies, and it is counted once (as an escapee where it left the
// containment) however many scans meet it.
func TestKillSurvivor(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	fz := safety.Dir("freezer")
	if fz == "" {
		t.Skip("no v1 freezer hierarchy")
	}
	for _, tier := range workingTiers(t, safety.Name()) {
		t.Run(string(tier), func(t *testing.T) {
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name(), PidsMax: safetyPids})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			bys := bystander(t, filepath.Join(fz, "bystander-"+string(tier)))
			s := startFrozen(t, m, `f=`+bys+`
`+moveFreeze("freezer.state", "FROZEN", "FROZEN")+`
echo ready; wait`)
			tr, child := s.tr, s.pids[0]

			const within = time.Second
			rep, err := tr.KillBy(time.Now().Add(within))
			t.Logf("%+v", rep)
			if !errors.Is(err, ErrNotEmpty) {
				t.Errorf("KillBy = %v, want ErrNotEmpty", err)
			}
			if rep.Duration > within+500*time.Millisecond {
				t.Errorf("KillBy took %v, deadline %v", rep.Duration, within)
			}
			want := []Process{{Pid: child, Comm: "sleep"}}
			if rep.Survivors != 1 || !slices.Equal(rep.Alive, want) {
				t.Errorf("Survivors %d Alive %v, want %v", rep.Survivors, rep.Alive, want)
			}
			if got := tr.Survivors(); !slices.Equal(got, want) {
				t.Errorf("Survivors() = %v, want %v", got, want)
			}
			// The frozen child holds the output pipe: every scan finds it
			// again and cannot end it. On cgroup1 it left the freezer
			// leaf: one escapee, counted by Kill and by no scan after it.
			// Elsewhere it stayed in the containment or the group: none.
			escapees := rep.Escapees
			for range 3 {
				n, err := tr.KillPipeHoldersBy(time.Now().Add(200 * time.Millisecond))
				if !errors.Is(err, ErrNotEmpty) {
					t.Errorf("KillPipeHoldersBy = %d, %v; want ErrNotEmpty", n, err)
				}
				escapees += n
			}
			if want := map[Tier]int{TierCgroup1: 1}[tier]; escapees != want {
				t.Errorf("escapees over Kill and three pipe-holder scans = %d, want %d", escapees, want)
			}
			// Thawed from outside, it acts on its pending SIGKILL.
			if err := os.WriteFile(filepath.Join(bys, "freezer.state"), []byte("THAWED"), 0); err != nil {
				t.Fatal(err)
			}
			waitDead(t, s)
			if got := tr.Survivors(); len(got) != 0 {
				t.Errorf("Survivors() after the thaw = %v", got)
			}
			_ = s.cmd.Wait()
			if err := tr.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			settle(m)
			assertNoLeaves(t, m, safety.Name())
		})
	}
}

// bystander makes cgroup dir in the v1 freezer hierarchy and starts in it
// a process that belongs to no tree; the cleanup thaws the cgroup, ends the
// process and removes the cgroup.
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
		_ = pollUntilTimeout(5*time.Second, func() bool { return unix.Rmdir(dir) == nil })
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitDead waits up to 5 s for every watched process to exit.
func waitDead(t *testing.T, s *started) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.dead()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still alive: %v", s.dead())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// nestedCrashScript makes a frozen cgroup inside the command's own leaf
// (cgroup.freeze in cgroup2, freezer.state in cgroup1) holding a sleeper.
func nestedCrashScript(tier Tier) string {
	mnt := findMounts()
	if tier == TierCgroup2 {
		return `f=` + mnt.v2 + `$(sed -n 's/^0:://p' /proc/self/cgroup)/frz
` + moveFreeze("cgroup.freeze", "1", "frozen 1") + `
wait`
	}
	return `f=` + mnt.v1["freezer"] + `$(sed -n 's/^[0-9]*:freezer://p' /proc/self/cgroup)/frz
` + moveFreeze("freezer.state", "FROZEN", "FROZEN") + `
wait`
}

// TestCrashNestedFrozen: a supervisor SIGKILLed while its command holds a
// frozen cgroup nested in its leaf. The watchdog, or without one the next
// New's stale sweep, thaws and kills it and removes every cgroup, the
// nested one first.
func TestCrashNestedFrozen(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		for _, mode := range []string{"hang", "hang-nowatchdog"} {
			t.Run(string(tier)+"/"+mode, func(t *testing.T) {
				if !tierWorks(safety.Name(), tier) {
					t.Skipf("tier %s does not work here", tier)
				}
				entry, marker := proctest.Marker(t)
				sup, wd := startHangingSupervisor(t, safety, mode, tier, entry, nestedCrashScript(tier), "2")
				leaves := instanceLeaves(safety.Name())
				var all []string
				for _, l := range leaves {
					all = append(all, subCgroups(l)...)
				}
				if len(all) == 0 {
					t.Fatalf("no nested cgroup under %v", leaves)
				}
				all = append(all, leaves...)
				if err := sup.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				_ = sup.Wait() // killed by the test
				defer reapOrphans(t, wd)
				if mode == "hang-nowatchdog" {
					if len(proctest.Survivors(marker)) == 0 {
						t.Fatal("control: nothing survived the crash without a watchdog")
					}
					m, err := New(Config{Tier: tier, CgroupParent: safety.Name()})
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
				}
				// The watchdog thaws, kills and removes a nested tree
				// of cgroups, next to other tests on a small machine:
				// it may need more than TestSupervisorKilled's second.
				proctest.NoSurvivors(t, marker, 3*time.Second)
				waitGone(t, all, 5*time.Second)
			})
		}
	}
}
