//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// outerPids is the pids.max of the cgroup corral itself runs in for the
// outer-limit tests: a container's or a systemd unit's limit below the
// per-command default (killtree.DefaultPidsMax).
const outerPids = 1500

// TestBombUnderOuterLimit runs `corral run` inside an outer cgroup with
// pids.max 1,500 (the safety cgroup: corral's own process is moved into
// it, as into a container) on each tier, with an unbounded fork bomb for a
// 3 s timeout. corral must not crash (it did: runtime/cgo: pthread_create
// failed, no Result): the Result comes, it names the pids limit with the
// container's note, and nothing of the bomb is left, by the marker in its
// environment (the C bomb does not touch it) and by the outer cgroup's own
// count, which no process in it can leave without privileges.
func TestBombUnderOuterLimit(t *testing.T) {
	proctest.Heavy(t)
	for _, tier := range workingTiers() {
		t.Run(tier, func(t *testing.T) {
			safety := proctest.Safe(t, outerPids)
			entry, m := proctest.Marker(t)
			cmd := exec.Command(corralBin, "run", "--json", "--timeout", "3", "--containment", tier,
				"--data-dir", t.TempDir(), "--", proctest.Command("bomb", "30", "plain"))
			cmd.Env = append(os.Environ(), entry)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := safety.Start(cmd); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			proctest.NoSurvivors(t, m, time.Second)
			if err != nil {
				t.Fatalf("corral run: %v\nstderr: %s", err, tail(stderr.String(), 2000))
			}
			var r supervisor.Result
			if err := json.Unmarshal([]byte(stdout.String()), &r); err != nil {
				t.Fatalf("no Result (%v): stdout %q stderr %s", err, tail(stdout.String(), 500), tail(stderr.String(), 2000))
			}
			t.Logf("limit %q, kill %+v, stderr tail %q", r.Limit, r.Kill, tail(r.Stderr, 300))
			if r.Limit != "pids" {
				t.Errorf("Result.limit %q, want pids", r.Limit)
			}
			if want := "the container's process limit (1,500 tasks) was reached"; !strings.Contains(r.Stderr, want) {
				t.Errorf("stderr %q lacks %q", tail(r.Stderr, 400), want)
			}
			if r.Kill.Processes < 20 {
				t.Errorf("kill %+v: the bomb did not grow to 20 processes", r.Kill)
			}
			n, err := safety.Current()
			for deadline := time.Now().Add(time.Second); err == nil && n != 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				n, err = safety.Current()
			}
			if err != nil || n != 0 {
				t.Errorf("outer cgroup pids.current %d (%v) a second after corral exited, want 0", n, err)
			}
		})
	}
}

// TestDoctorUnderOuterLimit: corral doctor run inside an outer cgroup
// with pids.max 1,500 and a 512 MiB memory limit prints both, the cgroup
// they come from, and the share a command gets.
func TestDoctorUnderOuterLimit(t *testing.T) {
	safety := proctest.Safe(t, outerPids)
	safety.LimitMemory(512 << 20)
	cmd := exec.Command(corralBin, "doctor")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := safety.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("corral doctor: %v\n%s", err, stderr.String())
	}
	pidsDir := safety.Dir("pids")
	if pidsDir == "" {
		pidsDir = safety.Dir("")
	}
	for _, want := range []string{
		"Lives under: a pids limit of 1500 tasks (" + pidsDir + "), ",
		"; a command gets at most ",
		"Lives under: a memory limit of 512.0 MiB (",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("doctor lacks %q:\n%s", want, stdout.String())
		}
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
