package killtree

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestPidsMax: an unbounded fork bomb in a containment with PidsMax 300 is
// refused forks (pids.events counts them, and Reached says pids) and never
// holds more than 300 tasks; Kill ends it.
func TestPidsMax(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			if !tierWorks(safety.Name(), tier) {
				t.Skipf("tier %s does not work here", tier)
			}
			const limit = 300
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name(), PidsMax: limit})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			entry, marker := proctest.Marker(t)
			t.Cleanup(func() { proctest.NoSurvivors(t, marker, 0) })
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command("bash", "-c", proctest.Command("bomb", lifetime, "plain"))
			cmd.Env = append(os.Environ(), entry)
			cmd.Stdout, cmd.Stderr = w, w
			tr, err := m.Start(cmd)
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { // also on failure: kill, reap the leader, close
				_, _ = tr.Kill()
				_ = cmd.Wait() // killed: no status to check
				_ = tr.Close()
			}()
			if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			pidsDir := pidsLeaf(tr)
			if pidsDir == "" {
				t.Skip("no pids controller here")
			}
			deadline := time.Now().Add(60 * time.Second)
			for rejectedForks(pidsDir) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the bomb never hit pids.max")
				}
				time.Sleep(20 * time.Millisecond) // polling a condition
			}
			if n, err := tr.Members(); err != nil || n > limit {
				t.Errorf("Members = %d, %v; want ≤ %d", n, err, limit)
			}
			cur, _ := strconv.Atoi(strings.TrimSpace(readFileOr(filepath.Join(pidsDir, "pids.current"))))
			if cur > limit {
				t.Errorf("pids.current %d > %d", cur, limit)
			}
			rep, err := tr.Kill()
			if err != nil {
				t.Fatal(err)
			}
			// The refusals before the kill count, not those of the
			// kill's own fork barrier (cgroup1 lowers pids.max to 0).
			if got := tr.Reached(); got != LimitPids {
				t.Errorf("Reached = %q, want pids", got)
			}
			t.Logf("capped bomb: %+v, pids.current was %d", rep, cur)
		})
	}
}

// pidsLeaf returns the cgroup directory holding the tree's pids.max.
func pidsLeaf(tr *Tree) string {
	for _, d := range tr.c.dirs() {
		if _, err := os.Stat(filepath.Join(d, "pids.max")); err == nil {
			return d
		}
	}
	return ""
}

// rejectedForks reads the "max" counter of pids.events.
func rejectedForks(dir string) int {
	for _, line := range strings.Split(readFileOr(filepath.Join(dir, "pids.events")), "\n") {
		if v, ok := strings.CutPrefix(line, "max "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
