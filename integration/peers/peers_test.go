//go:build linux

package peers

import (
	"fmt"
	"os"
	"strings"
	"testing"

	gocmd "github.com/go-cmd/cmd"

	"github.com/corral-sh/corral/integration/internal/benchkit"
	"github.com/corral-sh/corral/internal/proctest"
)

// TestMain dispatches the helper processes of the benchmarks.
func TestMain(m *testing.M) { proctest.Main(m) }

func init() {
	proctest.Register("rss-go-cmd", func(args []string) int { return benchkit.RSSHelper(run, args) })
	proctest.Register("kill-go-cmd", func(args []string) int { return benchkit.KillHelper(start, countMarked(args), args) })
}

// run runs command with go-cmd's default, buffered mode (NewCmd) and waits
// for its final status.
func run(command string) error {
	st := <-gocmd.NewCmd(benchkit.Shell(), "-c", command).Start()
	if st.Error != nil || st.Exit != 0 {
		return fmt.Errorf("go-cmd %q: exit %d: %v", command, st.Exit, st.Error)
	}
	return nil
}

// start starts command with go-cmd; stop is Cmd.Stop (SIGTERM to the
// process group), done is Cmd.Done.
func start(command string, env []string) (func(), <-chan struct{}, error) {
	c := gocmd.NewCmd(benchkit.Shell(), "-c", command)
	c.Env = append(os.Environ(), env...)
	c.Start()
	return func() { c.Stop() }, c.Done(), nil
}

// countMarked counts the live processes carrying the marker entry args[0].
func countMarked(args []string) func() int {
	return func() int {
		if len(args) != 1 {
			return 0
		}
		_, v, _ := strings.Cut(args[0], "=")
		return len(proctest.Survivors(v))
	}
}

// TestRun checks that the go-cmd contender runs a command and sees its output,
// so that the benchmarks below measure a working setup.
func TestRun(t *testing.T) {
	st := <-gocmd.NewCmd(benchkit.Shell(), "-c", "echo hi").Start()
	if st.Error != nil || st.Exit != 0 || len(st.Stdout) != 1 || st.Stdout[0] != "hi" {
		t.Fatalf("go-cmd echo hi: %+v", st)
	}
}

// floodBytes is the throughput flood: 2 GiB, 256 MiB with -short.
func floodBytes() int64 {
	if testing.Short() {
		return 256 << 20
	}
	return benchkit.ThroughputBytes
}

// BenchmarkThroughput drains the flood through go-cmd's buffered mode (MB/s),
// at most benchkit.BufferedMax bytes since go-cmd keeps all of it in memory.
func BenchmarkThroughput(b *testing.B) {
	n := benchkit.FloodSize(floodBytes(), true)
	b.Run("go-cmd", func(b *testing.B) {
		benchkit.ReportFlood(b, n)
		b.SetBytes(n)
		for b.Loop() {
			if err := run(benchkit.FloodCommand(n)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTrue is go-cmd's overhead on `true`.
func BenchmarkTrue(b *testing.B) {
	b.Run("go-cmd", func(b *testing.B) {
		for b.Loop() {
			if err := run("true"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPeakRSS is go-cmd's peak RSS while draining a flood in a child
// process (at most benchkit.BufferedMax bytes; 256 MiB with -short).
func BenchmarkPeakRSS(b *testing.B) {
	n := int64(benchkit.PeakRSSBytes)
	if testing.Short() {
		n = 256 << 20
	}
	b.Run("go-cmd", func(b *testing.B) { benchkit.BenchPeakRSS(b, "rss-go-cmd", benchkit.FloodSize(n, true)) })
}

// BenchmarkKillTree stops a 1,000-process tree, half of it setsid'd, with
// go-cmd's Stop inside a safety cgroup.
func BenchmarkKillTree(b *testing.B) {
	b.Run("go-cmd", func(b *testing.B) { benchkit.BenchKill(b, "kill-go-cmd") })
}
