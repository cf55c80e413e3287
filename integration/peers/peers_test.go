//go:build linux

package peers

import (
	"fmt"
	"io"
	"os"
	"os/exec"
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

// execDiscard is the baseline measured beside go-cmd: os/exec draining into
// io.Discard, as in package integration.
func execDiscard(command string) error {
	cmd := exec.Command(benchkit.Shell(), "-c", command)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd.Run()
}

// BenchmarkThroughput drains the flood through go-cmd's buffered mode (at
// most benchkit.BufferedMax bytes, since go-cmd keeps all of it in memory)
// and through the os/exec baseline, in turn every iteration (MB/s).
func BenchmarkThroughput(b *testing.B) {
	n := floodBytes()
	nb := benchkit.FloodSize(n, true)
	benchkit.Paired(b, []benchkit.Op{
		{Name: "go-cmd", Bytes: nb, Run: func() error { return run(benchkit.FloodCommand(nb)) }},
		{Name: "exec-discard", Bytes: n, Run: func() error { return execDiscard(benchkit.FloodCommand(n)) }},
	})
}

// BenchmarkTrue is go-cmd's overhead on `true` beside the os/exec baseline.
func BenchmarkTrue(b *testing.B) {
	benchkit.Paired(b, []benchkit.Op{
		{Name: "go-cmd", Run: func() error { return run("true") }},
		{Name: "exec-discard", Run: func() error { return execDiscard("true") }},
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
