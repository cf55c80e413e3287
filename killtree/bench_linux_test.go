package killtree

import (
	"fmt"
	"github.com/corral-sh/corral/killtree/internal/procfs"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// BenchmarkKillBomb measures Kill (from the call to its return, the tree
// confirmed empty) on 1,000-process bombs, per tier that works here. Each
// bomb runs under a supervise helper process inside a safety cgroup, which
// reports Kill's duration; the metric is kill-ms per bomb. plain and setsid
// are proctest bombs (this test binary re-executed: Go processes of three to
// five threads each); sleeptree is a binary tree of 1,023 single-threaded
// `sleep` processes forked by bash, closer to the C bomb of docs/killtree.md
// §9.
//
//	go test -run '^$' -bench BenchmarkKillBomb -benchtime 3x ./killtree/
func BenchmarkKillBomb(b *testing.B) {
	safety := proctest.Safe(b, safetyPids)
	var tiers []Tier
	for _, s := range Doctor(Config{CgroupParent: safety.Name()}) {
		if s.Works {
			tiers = append(tiers, s.Tier)
		}
	}
	for _, tier := range tiers {
		for _, mode := range []string{"plain", "setsid", "sleeptree"} {
			b.Run(string(tier)+"/"+mode, func(b *testing.B) {
				var total time.Duration
				for range b.N {
					entry, marker := proctest.Marker(b)
					script := proctest.Command("bomb", lifetime, mode, "1000")
					if mode == "sleeptree" {
						script = "echo ready; b() { if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; exec sleep " + lifetime + "; }; b 9"
					}
					out := runSupervisorB(b, safety, entry, "kill", string(tier), safety.Name(), script, "1000")
					var n, esc int
					var d time.Duration
					if _, err := fmt.Sscanf(out, "report %d %d %d", &n, &esc, &d); err != nil {
						b.Fatalf("helper said %q: %v", out, err)
					}
					if n < 900 {
						b.Fatalf("killed %d processes, want about 1000", n)
					}
					total += d
					proctest.NoSurvivors(b, marker, time.Second)
				}
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "kill-ms")
				b.ReportMetric(0, "ns/op") // the wall time per op is dominated by building the bomb
			})
		}
	}
}

// BenchmarkSpawnTrue times Start + Wait + Kill + Close of `true` in every
// tier that works here, and plain os/exec Run of the same binary, in one
// loop (the order rotating), so that every variant sees the same machine.
// It reports each variant's mean in µs and the cgroup tiers' extra time over
// pgroup: extra-cgroup2-µs is the spawn overhead the issue bounds at 300.
//
//	go test -run '^$' -bench BenchmarkSpawnTrue -benchtime 2000x ./killtree/
func BenchmarkSpawnTrue(b *testing.B) {
	bin := trueBinary()
	type variant struct {
		name string
		run  func() error
		took time.Duration
	}
	vs := []*variant{{name: "exec", run: func() error { return exec.Command(bin).Run() }}}
	for _, s := range Doctor(Config{}) {
		if !s.Works {
			continue
		}
		m, err := New(Config{Tier: s.Tier})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		vs = append(vs, &variant{name: string(s.Tier), run: func() error { return spawnTrue(m, bin) }})
	}
	n := 0
	for b.Loop() {
		for k := range vs {
			v := vs[(n+k)%len(vs)]
			start := time.Now()
			if err := v.run(); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			v.took += time.Since(start)
		}
		n++
	}
	mean := map[string]float64{}
	for _, v := range vs {
		mean[v.name] = float64(v.took.Microseconds()) / float64(n)
		b.ReportMetric(mean[v.name], v.name+"-µs")
	}
	for _, tier := range []Tier{TierCgroup2, TierCgroup1} {
		if m, ok := mean[string(tier)]; ok {
			if p, ok := mean[string(TierPgroup)]; ok {
				b.ReportMetric(m-p, "extra-"+string(tier)+"-µs")
			}
		}
	}
	b.ReportMetric(0, "ns/op") // the sum of every variant: meaningless
}

// spawnTrue runs bin to the end in a tree of m: Start, Wait for the exit,
// Kill, reap, Close.
func spawnTrue(m *Manager, bin string) error {
	_, err := spawnTrueTimed(m, bin)
	return err
}

// spawnTrueTimed is spawnTrue that also returns the time Start took.
func spawnTrueTimed(m *Manager, bin string) (time.Duration, error) {
	cmd := exec.Command(bin)
	t0 := time.Now()
	tr, err := m.Start(cmd)
	took := time.Since(t0)
	if err != nil {
		return took, err
	}
	<-tr.Exited()
	if _, err := tr.Kill(); err != nil {
		return took, err
	}
	if err := cmd.Wait(); err != nil {
		return took, err
	}
	return took, tr.Close()
}

// BenchmarkChildrenRead compares the two ways a scan can read this process's
// children list: opening /proc/<pid>/task/<pid>/children by path each time
// (what every scan did) against pread on the descriptor a Manager keeps open
// (what it does now).
//
//	go test -run '^$' -bench BenchmarkChildrenRead ./killtree/
func BenchmarkChildrenRead(b *testing.B) {
	own := openOwnChildren()
	if own == nil {
		b.Skip("no /proc/<pid>/task/<tid>/children here")
	}
	defer own.Close()
	path := own.Path()
	buf := make([]byte, 1024)
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, err := procfs.ReadFile(path, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pread", func(b *testing.B) {
		for b.Loop() {
			if _, err := own.ReadAll(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
