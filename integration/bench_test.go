//go:build linux

package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/integration/internal/benchkit"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/supervisor"
)

// The benchmarks behind docs/performance.md. bench.sh runs them
// with the go-cmd/cmd ones of the peers module and prints the table; the
// contenders are corral (the library), plain os/exec draining into
// io.Discard (the pipe's own rate), os/exec into a bytes.Buffer (the common
// mistake) and, for round trip and throughput, corral serve over HTTP.

// contenders that run in-process.
var contenders = []string{"corral", "exec-discard", "exec-buffer"}

func init() {
	for _, c := range contenders {
		proctest.Register("rss-"+c, func(args []string) int { return benchkit.RSSHelper(runner(c), args) })
		proctest.Register("kill-"+c, func(args []string) int { return benchkit.KillHelper(starter(c), countMarked(args), args) })
	}
	proctest.Register("rss-idle", func(args []string) int { return benchkit.RSSHelper(nil, args) })
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

// execCmd is the os/exec contender's command: bash -c command with stdout
// and stderr drained into io.Discard or a bytes.Buffer.
func execCmd(ctx context.Context, name, command string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, benchkit.Shell(), "-c", command)
	if name == "exec-buffer" {
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
	} else {
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	}
	return cmd
}

// runner returns the contender's way to run a command to the end.
func runner(name string) benchkit.Runner {
	if name != "corral" {
		return func(command string) error { return execCmd(context.Background(), name, command).Run() }
	}
	return func(command string) error {
		sup, err := supervisor.New(supervisor.Config{})
		if err != nil {
			return err
		}
		defer sup.Close()
		res, err := sup.Run(context.Background(), supervisor.Request{Command: command, Timeout: supervisor.MaxTimeout})
		if err == nil && exitCode(res) != 0 {
			err = fmt.Errorf("%q: exit %d signal %s", command, exitCode(res), res.Signal)
		}
		return err
	}
}

// starter returns the contender's way to start a command and stop it: a
// cancelled context in each case (os/exec then kills the shell only).
func starter(name string) benchkit.Starter {
	return func(command string, env []string) (func(), <-chan struct{}, error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		if name != "corral" {
			cmd := execCmd(ctx, name, command)
			cmd.Env = append(os.Environ(), env...)
			if err := cmd.Start(); err != nil {
				cancel()
				return nil, nil, err
			}
			go func() { cmd.Wait(); close(done) }()
			return cancel, done, nil
		}
		sup, err := supervisor.New(supervisor.Config{Containment: killtree.Config{CgroupParent: os.Getenv(benchkit.CgroupParentEnv)}})
		if err != nil {
			cancel()
			return nil, nil, err
		}
		envMap := map[string]string{}
		for _, e := range env {
			k, v, _ := strings.Cut(e, "=")
			envMap[k] = v
		}
		go func() {
			sup.Run(ctx, supervisor.Request{Command: command, Env: envMap, Timeout: supervisor.MaxTimeout})
			close(done)
		}()
		return cancel, done, nil
	}
}

// floodBytes is the throughput flood: 2 GiB, 256 MiB with -short.
func floodBytes() int64 {
	if testing.Short() {
		return 256 << 20
	}
	return benchkit.ThroughputBytes
}

// ops returns the contenders' calls of command for a paired benchmark:
// corral (one Supervisor), os/exec into io.Discard, os/exec into a
// bytes.Buffer (bufCommand, which may drain less) and corral serve over
// HTTP. bytes and bufBytes are what the commands drain.
func ops(b *testing.B, command string, bytes int64, bufCommand string, bufBytes int64) []benchkit.Op {
	sup := newLib(b, supervisor.Config{})
	srv := startServer(b)
	timeout := supervisor.MaxTimeout.Seconds()
	return []benchkit.Op{
		{Name: "corral", Bytes: bytes, Run: func() error { return libRun(b, sup, command) }},
		{Name: "exec-discard", Bytes: bytes, Run: func() error { return runner("exec-discard")(command) }},
		{Name: "exec-buffer", Bytes: bufBytes, Run: func() error { return runner("exec-buffer")(bufCommand) }},
		{Name: "server", Bytes: bytes, Run: func() error {
			r := srv.exec(b, api.ExecRequest{Command: command, Timeout: &timeout})
			if exitCode(r) != 0 || r.StdoutInfo.TotalBytes != bytes {
				return fmt.Errorf("server: exit %d, drained %d bytes, want %d", exitCode(r), r.StdoutInfo.TotalBytes, bytes)
			}
			return nil
		}},
	}
}

// BenchmarkThroughput drains `head -c 2G /dev/zero` through each contender
// in turn, every iteration (256 MiB with -short; exec-buffer at most
// benchkit.BufferedMax), and reports each one's MB/s.
func BenchmarkThroughput(b *testing.B) {
	n := floodBytes()
	nb := benchkit.FloodSize(n, true)
	benchkit.Paired(b, ops(b, benchkit.FloodCommand(n), n, benchkit.FloodCommand(nb), nb))
}

// libRun runs command through sup and fails unless it exited 0.
func libRun(b *testing.B, sup *supervisor.Supervisor, command string) error {
	res, err := sup.Run(context.Background(), supervisor.Request{Command: command, Timeout: supervisor.MaxTimeout})
	if err == nil && exitCode(res) != 0 {
		err = fmt.Errorf("%q: exit %d signal %s", command, exitCode(res), res.Signal)
	}
	return err
}

// BenchmarkTrue is the overhead on `true`: one whole call of each contender
// in turn per iteration (library Run, os/exec Run, HTTP round trip to corral
// serve), reported as each one's mean µs.
func BenchmarkTrue(b *testing.B) {
	benchkit.Paired(b, ops(b, "true", 0, "true", 0))
}

// BenchmarkPeakRSS runs each contender in a child process draining a 4 GiB
// flood (256 MiB with -short; exec-buffer at most benchkit.BufferedMax) and
// reports the child's VmHWM; "idle" is the same child running nothing.
func BenchmarkPeakRSS(b *testing.B) {
	n := int64(benchkit.PeakRSSBytes)
	if testing.Short() {
		n = 256 << 20
	}
	for _, c := range append([]string{"idle"}, contenders...) {
		b.Run(c, func(b *testing.B) { benchkit.BenchPeakRSS(b, "rss-"+c, benchkit.FloodSize(n, c == "exec-buffer")) })
	}
}

// BenchmarkKillTree starts a 1,000-process tree, half of it setsid'd, in
// each contender inside a safety cgroup, stops it the contender's way and
// reports the time to the call returning, whether it hung, and how many of
// the tree's processes survived.
func BenchmarkKillTree(b *testing.B) {
	for _, c := range contenders {
		b.Run(c, func(b *testing.B) { benchkit.BenchKill(b, "kill-"+c) })
	}
}
