package killtree

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// workingTiers lists the Linux tiers that work here, for the matrix.
func workingTiers(t *testing.T, parent string) []Tier {
	t.Helper()
	var out []Tier
	for _, s := range Doctor(Config{CgroupParent: parent}) {
		if s.Works {
			out = append(out, s.Tier)
		} else {
			t.Logf("tier %s does not work here: %s", s.Tier, s.Reason)
		}
	}
	return out
}

// scenario is one adversarial command of the matrix.
type scenario struct {
	name string
	// script builds the bash script; mig is a cgroup directory (of the
	// safety cgroup) a process may migrate into.
	script func(mig string) string
	// ready is how many lines to read from stdout before killing.
	ready int
	// exited: wait for the shell to exit before killing.
	exited bool
	// terminate: Terminate first and expect the tree to survive it.
	terminate bool
	// members: wait until Members reaches this many before killing.
	members int
	// minKilled is the least Report.Processes must say.
	minKilled int
	// escapees is the least Report.Escapees must say on the cgroup tiers.
	escapees int
	// cgroupOnly: the scenario only makes sense with a cgroup.
	cgroupOnly bool
}

const lifetime = "60"

// safetyPids is the safety cgroup's pids.max, and the containments' in the
// matrix. pids.max counts threads, and a bomb process (this test binary
// re-executed, GOMAXPROCS=1) has three to five (more under -race), so
// 1,000-process bombs need several thousand.
const safetyPids = 6000 // every helper expires by itself after this many seconds

func scenarios() []scenario {
	sleep := proctest.Command("sleep", lifetime)
	return []scenario{
		// A plain long command on the timeout path.
		{name: "sleep", script: func(string) string { return "echo ready; " + sleep }, ready: 1, minKilled: 1},
		// The shell exits; a background grandchild keeps the pipe open.
		{name: "bg-holds-pipe", script: func(string) string { return "(" + sleep + " &); echo ready" }, ready: 1, exited: true, minKilled: 1},
		// setsid and double-fork writers that ignore SIGPIPE.
		{name: "escaper", script: func(string) string { return "trap '' PIPE; " + proctest.Command("escaper", lifetime) }, ready: 1, exited: true, minKilled: 3},
		// coreutils timeout leaves the group with setpgid.
		// (timeout may not have started its child yet: at least bash and timeout.)
		{name: "timeout", script: func(string) string { return "timeout 100 env " + sleep + " & echo ready; wait" }, ready: 1, minKilled: 2},
		// set -m gives every job its own group.
		{name: "set-m", script: func(string) string { return "set -m; " + sleep + " & " + sleep + " & echo ready; wait" }, ready: 1, minKilled: 3},
		// A tree that ignores SIGTERM: Terminate leaves it, Kill ends it.
		{name: "ignore-term", script: func(string) string {
			it := proctest.Command("ignoreterm", lifetime)
			return "trap '' TERM; " + it + " & " + it + " & wait"
		}, ready: 2, terminate: true, minKilled: 3},
		// A root command that moves itself out of its cgroup: only the
		// baseline catches it, as an escapee.
		{name: "migrate", script: func(mig string) string {
			return "(echo $BASHPID > " + mig + "/cgroup.procs && " + sleep + ") & sleep 0.2; echo ready; wait"
		}, ready: 1, minKilled: 2, escapees: 1, cgroupOnly: true},
		// The shell exits and leaves its cgroup empty, but a child that
		// left the cgroup lives on: Members after the exit must not
		// take the tree for gone, and Kill must still find the escapee.
		{name: "migrate-exited", script: func(mig string) string {
			return "(echo $BASHPID > " + mig + "/cgroup.procs && " + sleep + ") & sleep 0.2; echo ready"
		}, ready: 1, exited: true, minKilled: 1, escapees: 1, cgroupOnly: true},
	}
}

func bombScenarios() []scenario {
	var out []scenario
	for _, mode := range []string{"plain", "setsid", "dfork"} {
		out = append(out, scenario{
			name:      "bomb-" + mode,
			script:    func(string) string { return proctest.Command("bomb", lifetime, mode, "1000") },
			members:   1000,
			minKilled: 900, // dfork's middle processes come and go; the oracle is NoSurvivors
		})
	}
	return out
}

// TestMatrix runs every scenario under every tier that works here, inside a
// safety cgroup, and checks the oracles: no marked survivor, no zombie of
// the tree, the cgroup directories gone, both pipes at EOF, descriptors back.
// Not parallel: the zombie oracle needs no other test's children around.
func TestMatrix(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	mnt := findMounts()
	for _, tier := range workingTiers(t, safety.Name()) {
		t.Run(string(tier), func(t *testing.T) {
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name(), PidsMax: safetyPids})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			mig := filepath.Join(mnt.v2, safety.Name())
			if tier == TierCgroup1 {
				mig = filepath.Join(mnt.v1["freezer"], safety.Name())
			}
			all := scenarios()
			if tier != TierPgroup && proctest.HeavyOn() {
				all = append(all, bombScenarios()...) // pgroup bombs: TestPgroupBombs
			}
			for _, sc := range all {
				if sc.cgroupOnly && tier == TierPgroup {
					continue
				}
				t.Run(sc.name, func(t *testing.T) { runScenario(t, m, sc, mig) })
			}
		})
	}
}

func runScenario(t *testing.T, m *Manager, sc scenario, mig string) {
	fds := fdCount(t, m)
	entry, marker := proctest.Marker(t)
	t.Cleanup(func() { proctest.NoSurvivors(t, marker, 0) }) // runs after the kill cleanup below
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	er, ew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", sc.script(mig))
	cmd.Env = append(os.Environ(), entry)
	cmd.Stdout, cmd.Stderr = w, ew
	tr, err := m.Start(cmd)
	w.Close()
	ew.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr.WatchPipes(rawFd(t, r), rawFd(t, er))
	dirs := tr.c.dirs()
	finished := false
	t.Cleanup(func() { // a failed test still kills, reaps and removes what it started
		if !finished {
			_, _ = tr.Kill()
			_ = cmd.Wait()
			_ = tr.Close()
			r.Close()
			er.Close()
		}
	})

	out := bufio.NewReader(r)
	for i := 0; i < sc.ready; i++ {
		if _, err := out.ReadString('\n'); err != nil {
			t.Fatalf("waiting for ready line %d: %v", i, err)
		}
	}
	if sc.exited {
		select {
		case <-tr.Exited():
		case <-time.After(10 * time.Second):
			t.Fatal("shell did not exit")
		}
		// What the supervisor does after the shell exits; on an empty
		// tree it lets Kill skip its sweep.
		if _, err := tr.Members(); err != nil {
			t.Fatalf("Members: %v", err)
		}
	}
	if sc.members > 0 {
		waitMembers(t, tr, sc.members)
	}
	if sc.terminate {
		n, err := tr.Terminate()
		if err != nil || n < 3 {
			t.Fatalf("Terminate = %d, %v; want ≥ 3", n, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err = tr.WaitEmpty(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitEmpty after SIGTERM to a TERM-ignoring tree = %v, want deadline", err)
		}
	}
	rep, err := tr.Kill()
	if err != nil {
		t.Fatalf("Kill: %v", err)
	}
	t.Logf("%+v", rep)
	if rep.Processes < sc.minKilled {
		t.Errorf("Report.Processes = %d, want ≥ %d", rep.Processes, sc.minKilled)
	}
	if rep.Escapees < sc.escapees {
		t.Errorf("Report.Escapees = %d, want ≥ %d", rep.Escapees, sc.escapees)
	}
	if n, err := tr.Members(); err != nil || n != 0 {
		t.Errorf("Members after Kill = %d, %v", n, err)
	}
	if err := tr.WaitEmpty(context.Background()); err != nil {
		t.Errorf("WaitEmpty after Kill: %v", err)
	}
	finished = true
	_ = cmd.Wait() // the leader: killed or exited; its status is not under test here
	for _, f := range []*os.File{r, er} {
		if err := drainEOF(f); err != nil {
			t.Errorf("pipe: %v", err)
		}
	}
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	settle(m) // the cgroups of an emptied tree go in the background
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s still there (%v)", d, err)
		}
	}
	if z := proctest.Zombies(os.Getpid()); len(z) > 0 {
		t.Errorf("zombies left: %v", z)
	}
	r.Close()
	er.Close()
	if got := fdCount(t, m); got != fds {
		t.Errorf("fd count %d, want %d", got, fds)
	}
}

// drainEOF reads f until EOF; EOF within a second proves no writer is left.
func drainEOF(f *os.File) error {
	if err := f.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, f)
	if err != nil {
		return fmt.Errorf("no EOF: %w", err)
	}
	return nil
}

// waitMembers polls Members until it reaches n (a condition, not a sleep).
func waitMembers(t *testing.T, tr *Tree, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	backoff := 10 * time.Millisecond
	for {
		got, err := tr.Members()
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tree reached %d members, want %d", got, n)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// TestPgroupBombs runs the 1,000-process bombs against the pgroup tier in a
// supervisor helper process inside the safety cgroup (the pgroup tier has no
// fork limit of its own).
func TestPgroupBombs(t *testing.T) {
	proctest.Heavy(t)
	if testing.Short() {
		t.Skip("-short: no 1,000-process bombs")
	}
	safety := proctest.Safe(t, safetyPids)
	for _, mode := range []string{"plain", "setsid", "dfork"} {
		t.Run(mode, func(t *testing.T) {
			entry, marker := proctest.Marker(t)
			defer proctest.NoSurvivors(t, marker, time.Second)
			out := runSupervisor(t, safety, entry, "kill", string(TierPgroup), safety.Name(),
				proctest.Command("bomb", lifetime, mode, "1000"), "1000")
			var processes, escapees int
			var dur time.Duration
			if _, err := fmt.Sscanf(out, "report %d %d %d", &processes, &escapees, &dur); err != nil {
				t.Fatalf("helper said %q: %v", out, err)
			}
			t.Logf("pgroup %s bomb: killed %d (escapees %d) in %v", mode, processes, escapees, dur)
			if processes < 900 {
				t.Errorf("killed %d, want ≥ 900", processes)
			}
		})
	}
}

// runSupervisor runs the "supervise" helper in the safety cgroup and returns
// its last stdout line.
func runSupervisor(t *testing.T, safety *proctest.Safety, entry string, args ...string) string {
	t.Helper()
	return runSupervisorB(t, safety, entry, args...)
}

func runSupervisorB(t testing.TB, safety *proctest.Safety, entry string, args ...string) string {
	t.Helper()
	argv, henv := proctest.Argv("supervise", args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), henv, entry)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := safety.Start(cmd); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("supervise helper: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
