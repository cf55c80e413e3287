package killtree

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"golang.org/x/sys/unix"
)

// python returns the python3 interpreter itself (not a pyenv shim, whose
// start costs more CPU than some tests measure), or skips the test.
func python(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// loadAverage returns the 1-minute load average, or 0.
func loadAverage() float64 {
	f := strings.Fields(readFileOr("/proc/loadavg"))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// limitTiers are the tiers the limit tests run on, each skipped where it
// does not work.
var limitTiers = []Tier{TierCgroup2, TierCgroup1, TierPgroup}

// runLimited runs `bash -c script` to its end in a Manager of tier nested in
// safety, with limits l, and returns the tree (killed, leader reaped, not
// closed: the caller reads it, then closes it), its output and the wait
// error. The script carries a fresh marker; the test's cleanup checks that
// nothing carrying it survived.
func runLimited(t *testing.T, safety *proctest.Safety, tier Tier, cfg Config, l Limits, script string, timeout time.Duration) (*Tree, string, error) {
	return runLimitedUntil(t, safety, tier, cfg, l, script, timeout, nil)
}

// runLimitedUntil is runLimited that also ends the wait (and kills the
// tree) once until, polled every 20 ms, holds.
func runLimitedUntil(t *testing.T, safety *proctest.Safety, tier Tier, cfg Config, l Limits, script string, timeout time.Duration, until func(*Tree) bool) (*Tree, string, error) {
	t.Helper()
	if !tierWorks(safety.Name(), tier) {
		t.Skipf("tier %s does not work here", tier)
	}
	cfg.Tier, cfg.CgroupParent = tier, safety.Name()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	entry, marker := proctest.Marker(t)
	t.Cleanup(func() { proctest.NoSurvivors(t, marker, time.Second) })
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), entry)
	var out bytes.Buffer
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	tr, err := m.StartLimited(cmd, l)
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	done := make(chan struct{})
	go func() { // owner: waited below
		defer close(done)
		_, _ = out.ReadFrom(r)
	}()
	deadline := time.After(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-tr.Exited():
			break wait
		case <-deadline:
			break wait
		case <-tick.C: // polling a condition
			if until != nil && until(tr) {
				break wait
			}
		}
	}
	if _, err := tr.Kill(); err != nil {
		t.Errorf("Kill: %v", err)
	}
	werr := cmd.Wait()
	<-done
	r.Close()
	return tr, out.String(), werr
}

// TestMemoryLimit: a command that allocates 2 GiB under a 256 MiB limit
// runs into it: Reached says memory, and nothing of the tree survives,
// including a `sleep` beside the allocator that the OOM killer does not pick
// (memory.oom.group on cgroup v2, killtree's kill at the OOM notification on
// v1). On pgroup the limit is RLIMIT_AS: the allocation fails in the
// process and nothing is reported as reached.
func TestMemoryLimit(t *testing.T) {
	proctest.Heavy(t)
	py := python(t)
	safety := proctest.Safe(t, safetyPids)
	safety.LimitMemory(1 << 30) // a failing limit below cannot take the machine
	for _, tier := range limitTiers {
		t.Run(string(tier), func(t *testing.T) {
			script := "sleep 100 & " + py + " -c 'b = bytearray(2 << 30)'; echo survived $?; sleep 100"
			start := time.Now()
			timeout := 30 * time.Second
			if tier == TierPgroup {
				timeout = 3 * time.Second // nothing ends the shell's own sleep there
			}
			tr, out, werr := runLimited(t, safety, tier, Config{}, Limits{MemoryBytes: 256 << 20}, script, timeout)
			took := time.Since(start)
			if tier == TierPgroup {
				if !strings.Contains(out, "MemoryError") {
					t.Errorf("pgroup: want a MemoryError under RLIMIT_AS, output %q", out)
				}
				if got := tr.Reached(); got != "" {
					t.Errorf("pgroup: Reached = %q, want none", got)
				}
				return
			}
			if got := tr.Reached(); got != LimitMemory {
				t.Errorf("Reached = %q, want memory (output %q, wait %v)", got, out, werr)
			}
			if strings.Contains(out, "survived") {
				t.Errorf("the shell went on after the OOM kill: %q", out)
			}
			if took > 20*time.Second {
				t.Errorf("the tree took %v to die after the OOM", took)
			}
			if u := tr.Usage(); !u.MemoryFromCgroup || u.PeakMemory < 200<<20 || u.PeakMemory > 256<<20 {
				t.Errorf("Usage = %+v, want a cgroup peak near 256 MiB", u)
			}
			t.Logf("OOM ended the tree in %v; killer %v", took, tr.OOMKiller())
		})
	}
}

// TestMemoryPeak: 150 MiB used under a 256 MiB limit is left alone, and the
// peak reported is within 10 % of 150 MiB.
func TestMemoryPeak(t *testing.T) {
	proctest.Heavy(t)
	py := python(t)
	safety := proctest.Safe(t, safetyPids)
	safety.LimitMemory(1 << 30)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			script := py + ` -c 'b = b"x" * (150 << 20); print("ok")'`
			tr, out, werr := runLimited(t, safety, tier, Config{}, Limits{MemoryBytes: 256 << 20}, script, 30*time.Second)
			if werr != nil || strings.TrimSpace(out) != "ok" {
				t.Fatalf("wait %v, output %q", werr, out)
			}
			if got := tr.Reached(); got != "" {
				t.Errorf("Reached = %q, want none", got)
			}
			u := tr.Usage()
			const want = 150 << 20
			if !u.MemoryFromCgroup || u.PeakMemory < want*9/10 || u.PeakMemory > want*11/10 {
				t.Errorf("peak %d bytes (%.1f MiB; from cgroup %v), want within 10%% of 150 MiB", u.PeakMemory, float64(u.PeakMemory)/(1<<20), u.MemoryFromCgroup)
			}
		})
	}
}

// TestCPULimit: a busy loop of 2 s of wall time under cpus 0.5 gets about
// one second of CPU time: never more than half the tree's life (the
// quota), and at least 800 ms on a machine that had the CPU to give.
func TestCPULimit(t *testing.T) {
	proctest.Heavy(t)
	py := python(t)
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			script := py + " -c 'import time\nt = time.monotonic() + 2\nwhile time.monotonic() < t: pass'"
			begin := time.Now()
			tr, out, werr := runLimited(t, safety, tier, Config{}, Limits{CPUs: 0.5}, script, 30*time.Second)
			lived := time.Since(begin)
			if werr != nil {
				t.Fatalf("wait %v, output %q", werr, out)
			}
			u := tr.Usage()
			cpu := u.CPUUser + u.CPUSystem
			// The quota allows half of every 100 ms period: half the
			// tree's life (which on a loaded machine is more than the
			// loop's 2 s, as Python takes longer to start), plus what CFS
			// bandwidth lets a runqueue overrun (its 5 ms slice, per CPU,
			// per period), plus the period in progress.
			slack := lived * time.Duration(5*runtime.NumCPU()) / 100
			if most := lived/2 + slack + 50*time.Millisecond; !u.CPUFromCgroup || cpu > most {
				t.Errorf("CPU %v (from cgroup %v) in a life of %v, want at most %v", cpu, u.CPUFromCgroup, lived, most)
			}
			if cpu < 800*time.Millisecond {
				// Less than its half CPU: the machine did not give it one.
				// That says nothing of the limit, unless the machine was idle.
				if load := loadAverage(); load < float64(runtime.NumCPU()) {
					t.Errorf("CPU %v with a load average of %.1f, want 800 ms to 1.2 s", cpu, load)
				} else {
					t.Logf("CPU %v, below 800 ms, with a load average of %.1f on %d CPUs: not held against the limit", cpu, load, runtime.NumCPU())
				}
			}
			if nf := tr.NotEnforced(); len(nf) != 0 {
				t.Errorf("NotEnforced = %v", nf)
			}
		})
	}
}

// TestKillLiftsCPUQuota: the kill of a CPU-limited tree with live members
// lifts its quota (a dying process needs the CPU to exit, and a quota
// throttled the way down: 84 processes under 0.1 CPU ended 1.35 s late),
// while Limits still says what the command was given.
func TestKillLiftsCPUQuota(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			tr, _, _ := runLimitedUntil(t, safety, tier, Config{}, Limits{CPUs: 0.1},
				"sleep 100 & sleep 100 & wait", 10*time.Second,
				func(tr *Tree) bool { n, _ := tr.Members(); return n >= 3 })
			if n, _ := tr.Members(); n != 0 {
				t.Fatalf("%d members after the kill", n)
			}
			var quota string
			for _, d := range tr.c.dirs() {
				quota += readFileOr(filepath.Join(d, "cpu.cfs_quota_us")) + readFileOr(filepath.Join(d, "cpu.max"))
			}
			if q := strings.Fields(quota); len(q) == 0 || (q[0] != "-1" && q[0] != "max") {
				t.Errorf("cpu quota files say %q after the kill, want no quota (-1 or max)", quota)
			}
			if got := tr.Limits().CPUs; got != 0.1 {
				t.Errorf("Limits().CPUs = %v after the kill, want the 0.1 the command was given", got)
			}
		})
	}
}

// TestPidsLimitReached: a fork loop under pids 100 is refused forks, and
// Reached says pids on every tier that has a pids limit; pgroup lists it
// as not enforced.
func TestPidsLimitReached(t *testing.T) {
	proctest.Heavy(t)
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range limitTiers {
		t.Run(string(tier), func(t *testing.T) {
			script := "while :; do sleep 100 & done 2>/dev/null"
			timeout := 60 * time.Second
			if tier == TierPgroup {
				timeout = time.Second // no limit: the loop runs to the timeout
			}
			reached := func(tr *Tree) bool { return tr.Reached() == LimitPids }
			tr, out, _ := runLimitedUntil(t, safety, tier, Config{}, Limits{Pids: 100}, script, timeout, reached)
			if tier == TierPgroup {
				if got := tr.NotEnforced(); len(got) != 1 || got[0] != LimitPids {
					t.Errorf("NotEnforced = %v, want [pids]", got)
				}
				return
			}
			if got := tr.Reached(); got != LimitPids {
				var ev []string
				for _, d := range tr.c.dirs() {
					ev = append(ev, d+": "+readFileOr(filepath.Join(d, "pids.events"))+readFileOr(filepath.Join(d, "pids.max")))
				}
				t.Errorf("Reached = %q, want pids (output %q, %+v, %q)", got, out, tr.Limits(), ev)
			}
		})
	}
}

// TestRusageGrandchild: on pgroup the usage comes from rusage, and a
// grandchild's CPU time and peak reach it through the waits of its parents.
func TestRusageGrandchild(t *testing.T) {
	proctest.Heavy(t)
	py := python(t)
	safety := proctest.Safe(t, safetyPids)
	safety.LimitMemory(2 << 30)
	script := `sh -c "` + py + ` -c 'import time
b = b\"x\" * (400 << 20)
t = time.process_time()
while time.process_time() - t < 1: pass'; true"; true`
	tr, out, werr := runLimited(t, safety, TierPgroup, Config{}, Limits{}, script, 30*time.Second)
	if werr != nil {
		t.Fatalf("wait %v, output %q", werr, out)
	}
	u := tr.Usage()
	if u.CPUFromCgroup || u.CPUUser+u.CPUSystem < 900*time.Millisecond {
		t.Errorf("Usage = %+v, want ≥ 900 ms of CPU from rusage", u)
	}
	if u.MemoryFromCgroup || u.PeakMemory < 400<<20 || u.PeakMemory > 500<<20 {
		t.Errorf("peak %d bytes (%.1f MiB), want the grandchild's 400 MiB and a bit", u.PeakMemory, float64(u.PeakMemory)/(1<<20))
	}
}

// TestRetune: a prepared containment takes a lower limit by rewriting its
// files; one without a memory leaf is replaced by one with it.
func TestRetune(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			for _, tc := range []struct {
				name string
				cfg  Config
				l    Limits
			}{
				// The prepared leaf has 512 MiB: rewritten to 256 MiB.
				{"lower", Config{MemoryMax: 512 << 20, CPUs: 1}, Limits{MemoryBytes: 256 << 20, CPUs: 0.5}},
				// The prepared leaf has no memory limit: a fresh one gets it.
				{"fresh", Config{}, Limits{MemoryBytes: 256 << 20, CPUs: 0.5}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					tr, _, _ := runLimited(t, safety, tier, tc.cfg, tc.l, "true", 10*time.Second)
					if got := tr.Limits(); got.MemoryBytes != tc.l.MemoryBytes || got.CPUs != tc.l.CPUs {
						t.Errorf("Limits = %+v, want %+v", got, tc.l)
					}
					var mem, quota string
					for _, d := range tr.c.dirs() {
						mem += readFileOr(filepath.Join(d, "memory.limit_in_bytes")) + readFileOr(filepath.Join(d, "memory.max"))
						quota += readFileOr(filepath.Join(d, "cpu.cfs_quota_us")) + readFileOr(filepath.Join(d, "cpu.max"))
					}
					if strings.TrimSpace(mem) != "268435456" {
						t.Errorf("memory limit files say %q, want 268435456", mem)
					}
					if q := strings.Fields(quota); len(q) == 0 || q[0] != "50000" {
						t.Errorf("cpu quota files say %q, want 50000", quota)
					}
				})
			}
		})
	}
}

// BenchmarkSpawnLimits times Start + Wait + Kill + Close of `true` on the
// default tier with a memory and CPU limit (Config.MemoryMax and CPUs, so
// the preparer makes the leaves ahead of time), with a memory limit alone,
// and without, in one loop, the order rotating. limits-extra-µs is the cost
// of memory + CPU, which the issue bounds at 150; memory-extra-µs that of
// memory alone; the -start- metrics are the same for the Start call alone
// (the thread trick's moves), the rest being the command's life and end
// in its leaves. On a hybrid host the CPU leaf is a v1 cpu cgroup, which the
// starting thread joins and leaves (the thread trick): each move of a
// running thread between cpu cgroups reschedules it (sched_move_task), which
// costs nothing on an idle machine and a wait for a CPU on a loaded one.
//
//	go test -run '^$' -bench BenchmarkSpawnLimits -benchtime 2000x ./killtree/
func BenchmarkSpawnLimits(b *testing.B) {
	bin := trueBinary()
	var ms []*Manager
	for _, cfg := range []Config{{}, {MemoryMax: 512 << 20}, {MemoryMax: 512 << 20, CPUs: 1}} {
		m, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		ms = append(ms, m)
	}
	took := make([]time.Duration, len(ms))
	starts := make([]time.Duration, len(ms))
	n := 0
	load := loadAverage()
	for b.Loop() {
		for k := range ms {
			i := (n + k) % len(ms)
			start := time.Now()
			st, err := spawnTrueTimed(ms[i], bin)
			if err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
			starts[i] += st
		}
		n++
	}
	mean := func(i int) float64 { return float64(took[i].Microseconds()) / float64(n) }
	b.ReportMetric(mean(0), "plain-µs")
	b.ReportMetric(mean(1), "memory-µs")
	b.ReportMetric(mean(2), "limits-µs")
	b.ReportMetric(mean(1)-mean(0), "memory-extra-µs")
	b.ReportMetric(mean(2)-mean(0), "limits-extra-µs")
	startMean := func(i int) float64 { return float64(starts[i].Microseconds()) / float64(n) }
	b.ReportMetric(startMean(1)-startMean(0), "memory-start-extra-µs")
	b.ReportMetric(startMean(2)-startMean(0), "limits-start-extra-µs")
	b.ReportMetric(0, "ns/op")
	b.Logf("tier %s; load average %.1f before, %.1f after", ms[0].Tier(), load, loadAverage())
}

// BenchmarkOOMKill measures, on each cgroup tier, the time from the OOM
// notification of a containment holding a 1,000-process tree (a binary
// tree of 1,023 `sleep`s beside a Python that allocates 2 GiB under a 1 GiB
// limit) to the tree confirmed empty and its leader reaped: what the
// supervisor waits for before it makes the Result (oom-to-empty-ms). The
// notification is the benchmark's own eventfd on the leaf's
// memory.oom_control, registered before the allocation starts; the Tree's
// own watch wakes on the same event.
//
// Most of that time is the kernel's: tree-cpu-ms is the CPU time the
// tree's processes used from the notification until they were gone (the
// containment's accounting: their exits, page tables torn down one process
// at a time, and the Python's 1 GiB freed), and floor-ms that divided by
// the machine's CPUs, the least wall time the kernel needs for it with
// every CPU free. self-cpu-ms is this process's CPU time meanwhile (the
// kill, the waits, the reaping of 1,024 zombies, and the benchmark).
//
//	go test -run '^$' -bench BenchmarkOOMKill -benchtime 3x ./killtree/
func BenchmarkOOMKill(b *testing.B) {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		b.Skipf("no python3: %v", err)
	}
	py := strings.TrimSpace(string(out))
	safety := proctest.Safe(b, safetyPids)
	safety.LimitMemory(3 << 30)
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		b.Run(string(tier), func(b *testing.B) {
			if !tierWorks(safety.Name(), tier) {
				b.Skipf("tier %s does not work here", tier)
			}
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name(), PidsMax: safetyPids})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			var sum oomTimes
			for range b.N {
				r := oomKillOnce(b, m, py)
				sum.took += r.took
				sum.treeCPU += r.treeCPU
				sum.selfCPU += r.selfCPU
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
			b.ReportMetric(ms(sum.took), "oom-to-empty-ms")
			b.ReportMetric(ms(sum.treeCPU), "tree-cpu-ms")
			b.ReportMetric(ms(sum.treeCPU)/float64(runtime.NumCPU()), "floor-ms")
			b.ReportMetric(ms(sum.selfCPU), "self-cpu-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// oomTimes is what one tree of BenchmarkOOMKill measured.
type oomTimes struct {
	took    time.Duration // OOM notification to the tree confirmed empty and reaped
	treeCPU time.Duration // CPU time of the tree's processes meanwhile
	selfCPU time.Duration // CPU time of this process meanwhile
}

// selfCPU returns this process's CPU time so far.
func selfCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// oomKillOnce runs one tree of BenchmarkOOMKill.
func oomKillOnce(b *testing.B, m *Manager, py string) oomTimes {
	entry, marker := proctest.Marker(b)
	defer proctest.NoSurvivors(b, marker, time.Second)
	trigger := filepath.Join(b.TempDir(), "go")
	script := "b() { if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; exec sleep 120; }; b 9 & " +
		"while [ ! -e " + trigger + " ]; do sleep 0.05; done; " + py + " -c 'b = bytearray(2 << 30)'; sleep 120"
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), entry)
	tr, err := m.StartLimited(cmd, Limits{MemoryBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	var leaf string
	for _, d := range tr.c.dirs() {
		if _, err := os.Stat(filepath.Join(d, "memory.oom_control")); err == nil {
			leaf = d
		}
	}
	ev := (&cgLimits{mem: leaf, lim: Limits{MemoryBytes: 1}}).oomEventFD()
	if ev == nil {
		b.Fatal("cannot watch the OOM of the leaf")
	}
	defer ev.Close()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) { // polling a count
		if n, _ := tr.Members(); n >= 1000 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the tree never reached 1,000 processes")
		}
	}
	load := loadAverage()
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	var buf [8]byte
	if _, err := ev.Read(buf[:]); err != nil {
		b.Fatal(err)
	}
	oom := time.Now()
	u0, self0 := tr.Usage(), selfCPU()
	<-tr.Exited()
	exited := time.Since(oom)
	rep, err := tr.Kill()
	if err != nil {
		b.Fatal(err)
	}
	_ = cmd.Wait() // killed
	r := oomTimes{took: time.Since(oom), selfCPU: selfCPU() - self0}
	u1 := tr.Usage()
	if !u1.CPUFromCgroup {
		b.Fatalf("no CPU accounting in the containment: %+v", u1)
	}
	r.treeCPU = u1.CPUUser + u1.CPUSystem - u0.CPUUser - u0.CPUSystem
	b.Logf("%s: leader dead after %v, tree empty and reaped after %v; the tree's CPU meanwhile %v, this process's %v (the last Kill: %+v); load average %.1f before the allocation, %.1f after",
		m.Tier(), exited, r.took, r.treeCPU, r.selfCPU, rep, load, loadAverage())
	if tr.Reached() != LimitMemory {
		b.Errorf("Reached = %q", tr.Reached())
	}
	return r
}
