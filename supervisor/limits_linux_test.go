package supervisor

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
)

// TestLimitsInvalid: limits out of bounds are refused before anything
// starts, with a reason that names the field.
func TestLimitsInvalid(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Containment: killtree.Config{MemoryMax: 1 << 30, CPUs: 1, PidsMax: 500}})
	for _, tc := range []struct {
		name  string
		l     Limits
		field string
	}{
		{"negative memory", Limits{MemoryBytes: -1}, "limits.memoryBytes"},
		{"one byte", Limits{MemoryBytes: 1}, "limits.memoryBytes"},
		{"memory over the server's", Limits{MemoryBytes: 2 << 30}, "limits.memoryBytes"},
		{"negative cpus", Limits{CPUs: -0.5}, "limits.cpus"},
		{"tiny cpus", Limits{CPUs: 0.001}, "limits.cpus"},
		{"cpus over the server's", Limits{CPUs: 1.5}, "limits.cpus"},
		{"10,000 cpus", Limits{CPUs: 10000}, "limits.cpus"},
		{"negative pids", Limits{Pids: -3}, "limits.pids"},
		{"pids over the server's", Limits{Pids: 501}, "limits.pids"},
		{"too few pids for a shell", Limits{Pids: 1}, "limits.pids must be at least 2"},
	} {
		_, err := s.Run(context.Background(), Request{Command: "echo started", Limits: tc.l})
		var re *RequestError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, tc.field) {
			t.Errorf("%s: err = %v, want an invalid request naming %s", tc.name, err, tc.field)
		}
	}
	if n := s.Stats().Started; n != 0 {
		t.Errorf("%d commands started, want none", n)
	}
	// Below the ceilings, and at them, is fine.
	res, err := s.Run(context.Background(), Request{Command: "echo ok", Limits: Limits{MemoryBytes: 1 << 30, CPUs: 0.5, Pids: 100}})
	if err != nil || res.Stdout != "ok\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	// New refuses its own limits out of the same bounds.
	if _, err := New(Config{Containment: killtree.Config{MemoryMax: 1}}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("New with a 1-byte memory limit: %v", err)
	}
}

// TestLimitResults: a command that runs into its memory limit and one that
// runs into its pids limit say so in the Result (limit, the note), report
// their usage, and leave nothing alive; the pids one still ends at its
// timeout. On the default tier (killtree's tests force every tier).
func TestLimitResults(t *testing.T) {
	proctest.Heavy(t)
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	py := strings.TrimSpace(string(out))
	safety := proctest.Safe(t, 4096)
	safety.LimitMemory(1 << 30)
	for _, st := range killtree.Doctor(killtree.Config{CgroupParent: safety.Name()}) {
		if !st.Chosen {
			continue
		}
		if st.Tier == killtree.TierPgroup {
			t.Skip("pgroup: no cgroup to report a limit (killtree's tests cover RLIMIT_AS)")
		}
		t.Run(string(st.Tier), func(t *testing.T) {
			s := newSup(t, Config{Containment: killtree.Config{Tier: st.Tier, CgroupParent: safety.Name()}})
			// A terminal command's limits are a pipe command's.
			t.Run("pipe", func(t *testing.T) { limitResults(t, s, py, nil) })
			t.Run("tty", func(t *testing.T) { limitResults(t, s, py, &TTYSize{}) })
		})
	}
}

// limitResults runs TestLimitResults' memory hog and task maker, on a
// terminal when tty is set.
func limitResults(t *testing.T, s *Supervisor, py string, tty *TTYSize) {
	res := run(t, s, Request{Command: "sleep 100 & " + py + " -c 'b = bytearray(2 << 30)'; echo survived; sleep 100",
		Limits: Limits{MemoryBytes: 256 << 20}, Timeout: 60 * time.Second, TTY: tty})
	if res.Limit != "memory" || !strings.Contains(res.Stderr, "[corral: the memory limit (256 MiB) was reached; ") {
		t.Errorf("memory: limit %q, stderr %q", res.Limit, res.Stderr)
	}
	if strings.Contains(res.Stdout, "survived") || res.ExitCode != nil || res.TimedOut {
		t.Errorf("memory: the tree went on: %+v", res)
	}
	// kill.processes counts what corral killed: on cgroup v1 (no
	// memory.oom.group) the kernel kills one process, python, and corral
	// the rest at the OOM notification (bash and sleep); where the kernel
	// kills the whole tree, none.
	if strings.Contains(res.Stderr, "corral killed the process tree") && res.Kill.Processes < 2 {
		t.Errorf("memory: corral killed the tree at the OOM, kill %+v counts fewer than its bash and sleep", res.Kill)
	}
	t.Logf("memory: kill %+v", res.Kill)
	if res.Usage == nil || res.Usage.PeakMemoryBytes < 200<<20 || res.Usage.PeakMemoryBytes > 256<<20 {
		t.Errorf("memory: usage %+v, want a peak near 256 MiB", res.Usage)
	}

	// A loop that makes tasks and goes on when refused, until the
	// timeout: threads, which pids.max counts like processes, and
	// which this loaded machine makes far faster than forks
	// (killtree's TestPidsLimitReached runs a bash fork loop).
	forker := py + ` -c 'import threading, time
while True:
    try:
        threading.Thread(target=time.sleep, args=(100,), daemon=True).start()
    except RuntimeError:
        time.sleep(0.01)'`
	res = run(t, s, Request{Command: forker, Limits: Limits{Pids: 100}, Timeout: 5 * time.Second, TTY: tty})
	if res.Limit != "pids" || !res.TimedOut || !strings.Contains(res.Stderr, "[corral: the process limit (100 tasks) was reached; the kernel refused at least one fork.]") {
		t.Errorf("pids: limit %q, timed out %v, stderr %q", res.Limit, res.TimedOut, res.Stderr)
	}
	if res.Kill.Processes < 1 {
		t.Errorf("pids: killed %d processes at the timeout, want the forker", res.Kill.Processes)
	}
}

// TestUsageEveryTier: every Result carries usage, on every tier, and the
// pgroup tier reports the limits it does not enforce.
func TestUsageEveryTier(t *testing.T) {
	safety := proctest.Safe(t, 4096)
	safety.LimitMemory(2 << 30)
	for _, st := range killtree.Doctor(killtree.Config{CgroupParent: safety.Name()}) {
		if !st.Works {
			continue
		}
		t.Run(string(st.Tier), func(t *testing.T) {
			s := newSup(t, Config{Containment: killtree.Config{Tier: st.Tier, CgroupParent: safety.Name(), CPUs: 1, MemoryMax: 1 << 30}})
			res := run(t, s, Request{Command: "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"})
			if res.Usage == nil || res.Usage.CPUUserMs+res.Usage.CPUSystemMs <= 0 {
				t.Errorf("usage %+v, want CPU time", res.Usage)
			}
			// With a memory limit the cgroup tiers have the tree's peak;
			// rusage (pgroup) knows none for a shell smaller than corral.
			if st.Tier != killtree.TierPgroup && (res.Usage == nil || res.Usage.PeakMemoryBytes <= 0) {
				t.Errorf("usage %+v, want a peak", res.Usage)
			}
			want := ""
			if st.Tier == killtree.TierPgroup {
				want = "cpus,pids"
			}
			if got := strings.Join(res.LimitsNotEnforced, ","); got != want {
				t.Errorf("limitsNotEnforced = %q, want %q", got, want)
			}
		})
	}
}

// TestJobUsage: a job's listing carries its usage while it runs and its
// final Result's once it exited.
func TestJobUsage(t *testing.T) {
	s := newSup(t, Config{})
	st, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{Command: "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; echo done; sleep 100"})})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Jobs().Get(st.ID)
	if err != nil || info.Usage == nil {
		t.Fatalf("Job = %+v, %v; want a usage", info, err)
	}
	res, err := s.Jobs().Kill(st.ID)
	if err != nil || res.Usage == nil {
		t.Fatalf("Jobs.Kill = %+v, %v", res, err)
	}
	info, err = s.Jobs().Get(st.ID)
	if err != nil || info.Usage == nil || *info.Usage != *res.Usage {
		t.Errorf("exited job's usage %+v, want the Result's %+v (%v)", info.Usage, res.Usage, err)
	}
}
