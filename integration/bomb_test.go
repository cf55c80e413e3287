//go:build linux

package integration

import (
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/supervisor"
)

// bombPids is the safety cgroup's pids.max for the bomb tests.
const bombPids = 2000

// runInSafety runs command through the library with a 2 s timeout, its
// containment nested in a fresh safety cgroup with pids.max bombPids, and
// checks that it timed out, that the tree was inside the safety cgroup while
// it ran (pids.current > 0 at its first output), that nothing carrying the
// marker is left within a second, and that the safety cgroup is empty
// within a second too (its zombies reaped).
func runInSafety(t *testing.T, tier killtree.Tier, command string) supervisor.Result {
	t.Helper()
	safety := proctest.Safe(t, bombPids)
	sup := newLib(t, supervisor.Config{Containment: killtree.Config{Tier: tier, CgroupParent: safety.Name()}})
	var inside atomic.Int64
	m := marker(t)
	start := time.Now()
	r := runLib(t, sup, call{command: command, marker: m, timeout: 2}, func(ev supervisor.Event) {
		if ev.Event == supervisor.EventOutput && inside.Load() == 0 {
			n, _ := safety.Current()
			inside.Store(int64(n))
		}
	})
	took := time.Since(start)
	proctest.NoSurvivors(t, m, time.Second)
	t.Logf("%s: killed %d processes (tier %s); pids.current %d at the first output; Run took %v",
		command[:min(len(command), 60)], r.Kill.Processes, r.Kill.Tier, inside.Load(), took.Round(time.Millisecond))
	if !r.TimedOut {
		t.Errorf("timedOut false (exit %d, signal %q), want the 2 s timeout", exitCode(r), r.Signal)
	}
	if inside.Load() == 0 {
		t.Error("the command's first output came while the safety cgroup counted no task: the tree ran outside it")
	}
	// pids.current also counts the tree's zombies until the reaper's
	// sweeps have waited for them (the v1 pids controller uncharges a task
	// when it is released, not when it dies): the same second as for the
	// living.
	n, err := safety.Current()
	if n != 0 {
		t.Logf("safety cgroup pids.current %d right after Run (%d zombies of this process)", n, len(proctest.Zombies(os.Getpid())))
	}
	for deadline := time.Now().Add(time.Second); err == nil && n != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		n, err = safety.Current()
	}
	if err != nil || n != 0 {
		t.Errorf("safety cgroup pids.current %d (%v) a second after Run, want 0", n, err)
	}
	return r
}

// TestForkBombs runs unbounded fork bombs (plain, setsid, double fork) for
// 2 s inside the safety cgroup in the cgroup tiers (-short: the plain bomb
// in the strongest tier only). The pgroup tier is left out: it nests nothing
// in the safety cgroup, so a bomb there would not be capped. Nothing may survive, and the bomb must have grown (at least 20
// processes killed) for the test to mean anything.
func TestForkBombs(t *testing.T) {
	proctest.Heavy(t)
	warmUp(t)
	check := processOracles(t)
	defer check()
	tiers := []killtree.Tier{killtree.TierCgroup2, killtree.TierCgroup1}
	modes := []string{"plain", "setsid", "dfork"}
	if testing.Short() {
		tiers, modes = tiers[:1], modes[:1]
	}
	for _, tier := range tiers {
		for _, mode := range modes {
			t.Run(string(tier)+"/"+mode, func(t *testing.T) {
				r := runInSafety(t, tier, proctest.Command("bomb", "30", mode))
				if r.Kill.Processes < 20 {
					t.Errorf("kill %+v: the bomb did not grow to 20 processes", r.Kill)
				}
			})
		}
	}
}

// TestStressNG runs `stress-ng --fork 4 --daemon 4 --session 4 --timeout 60s`
// (the double-fork and orphaned-session torture tests) and kills it at a 2 s
// timeout; nothing may survive.
func TestStressNG(t *testing.T) {
	if _, err := exec.LookPath("stress-ng"); err != nil {
		t.Skip("stress-ng is not installed (.ci/run installs it with apt-get)")
	}
	warmUp(t)
	check := processOracles(t)
	defer check()
	t.Run("group", func(t *testing.T) {
		r := runInSafety(t, "", "stress-ng --fork 4 --daemon 4 --session 4 --timeout 60s --metrics-brief")
		if r.Kill.Processes < 4 || !strings.Contains(r.Stdout+r.Stderr, "stress-ng") {
			t.Errorf("kill %+v stdout %q stderr %q: stress-ng did not run", r.Kill, r.Stdout, r.Stderr)
		}
	})
}
