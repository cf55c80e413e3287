//go:build linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
)

// abortWithin is how soon a tree must be gone after its caller went away.
const abortWithin = time.Second

// escapingTree is a command whose tree has a plain, a setsid and a
// double-forked writer (proctest escaper) and a background sleep, prints
// "go" once all of them run, and then sleeps.
func escapingTree() string {
	return proctest.Command("escaper", "60") + "; sleep 1000 & echo go; sleep 1000"
}

// waitFor polls cond every 10 ms until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAbort aborts a running tree by the HTTP client going away in the
// middle of an NDJSON stream, and by MCP cancellation (go-sdk client over
// `corral mcp`): the whole tree must be gone within a second.
func TestAbort(t *testing.T) {
	warmUp(t)
	check := processOracles(t)
	defer check()
	t.Run("http-client-gone", func(t *testing.T) {
		srv := startServer(t)
		m := marker(t)
		ctx, cancel := context.WithCancel(context.Background())
		resp, dec := srv.stream(t, ctx, api.ExecRequest{Command: escapingTree(), Env: map[string]string{proctest.MarkerEnv: m}})
		waitOutput(t, dec, "go\n")
		// The shell, the escaper's three writers and sleep; a process in
		// the middle of an exec shows no environment for a moment.
		waitFor(t, 5*time.Second, "the tree starting", func() bool { return len(proctest.Survivors(m)) >= 5 })
		cancel() // Closes the connection mid-stream.
		resp.Body.Close()
		checkGoneWithin(t, m, abortWithin)
	})
	t.Run("mcp-cancel", func(t *testing.T) {
		cmd := exec.Command(corralBin, "mcp", "--data-dir", t.TempDir())
		cmd.Env = append(os.Environ(), "CORRAL_CONTAINMENT=")
		c := mcp.NewClient(&mcp.Implementation{Name: "corral-integration", Version: "test"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect to corral mcp: %v", err)
		}
		defer func() {
			if err := cs.Close(); err != nil {
				t.Errorf("close the MCP session: %v", err)
			}
		}()
		m := marker(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{
				"command": "export " + proctest.MarkerEnv + "=" + m + "; " + escapingTree()}})
			done <- err
		}()
		// The shell, the escaper's three writers and sleep.
		waitFor(t, 30*time.Second, "the tree starting", func() bool { return len(proctest.Survivors(m)) >= 5 })
		cancel()
		if err := <-done; err == nil {
			t.Error("the cancelled call returned no error")
		}
		checkGoneWithin(t, m, abortWithin)
	})
}

// checkGoneWithin fails t if anything carrying the marker is alive after
// within, and logs how long the tree took to go.
func checkGoneWithin(t *testing.T, m string, within time.Duration) {
	t.Helper()
	start := time.Now()
	proctest.NoSurvivors(t, m, within)
	t.Logf("tree gone %v after the abort", time.Since(start).Round(time.Millisecond))
}

// TestServeKilled SIGKILLs `corral serve` while ten commands run, each a
// tree with setsid and double-forked writers: killtree's watchdog must kill
// every one of them within a second.
func TestServeKilled(t *testing.T) {
	warmUp(t)
	check := processOracles(t)
	defer check()
	t.Run("group", func(t *testing.T) {
		srv := startServer(t)
		m := marker(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for i := range 10 {
			resp, dec := srv.stream(t, ctx, api.ExecRequest{Command: escapingTree(), Env: map[string]string{proctest.MarkerEnv: m}})
			defer resp.Body.Close()
			waitOutput(t, dec, "go\n")
			t.Logf("command %d running", i+1)
		}
		// The test process is a child subreaper (warmUp made a Supervisor),
		// so what the server leaves behind is reparented here; remember it
		// to reap it afterwards.
		adopted := descendants(srv.pid())
		if n := len(proctest.AtLeast(m, 50, 5*time.Second, nil)); n < 50 {
			t.Fatalf("%d marked processes before the kill, want at least 50", n)
		}
		if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		srv.cmd.Wait()
		checkGoneWithin(t, m, time.Second)
		reapAdopted(t, adopted)
	})
}

// descendants lists every process below pid (by PPID in /proc/<pid>/stat).
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := ppid(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// ppid reads the parent of pid from /proc/<pid>/stat.
func ppid(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}

// reapAdopted reaps, by PID, the processes of pids that were reparented to
// the test process and have exited, waiting up to five seconds for them to
// exit (the watchdog ends after its kill). Only these PIDs are waited for,
// so no other test's child is reaped from under its exec.Cmd.
func reapAdopted(t *testing.T, pids []int) {
	t.Helper()
	self := os.Getpid()
	deadline := time.Now().Add(5 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		pids = slices.DeleteFunc(pids, func(p int) bool {
			pp, alive := ppid(p)
			if !alive {
				return true // Gone (reaped by init or its own parent).
			}
			if pp != self {
				return false
			}
			var ws unix.WaitStatus
			got, err := unix.Wait4(p, &ws, unix.WNOHANG, nil)
			return got == p || err != nil
		})
		if len(pids) > 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(pids) > 0 {
		t.Errorf("%d processes the server left are still not gone: %v", len(pids), pids)
	}
}
