//go:build linux

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
)

// TestThousandCommands runs 1,000 commands in a row through one server (100
// with -short), every 25th leaving a background child behind, and checks that the
// server ends with no zombie child and the same number of descriptors and
// threads as after a warm-up, and the same go_goroutines when /metrics
// exports it.
func TestThousandCommands(t *testing.T) {
	proctest.Heavy(t)
	warmUp(t)
	check := processOracles(t)
	defer check()
	t.Run("group", func(t *testing.T) {
		n := 1000
		if testing.Short() {
			n = 100
		}
		srv := startServer(t)
		m := marker(t)
		run := func(i int) {
			cmd, lingering := fmt.Sprintf("echo %d", i), 0
			if i%25 == 0 {
				// Costs the settle (250 ms), so only every 25th.
				cmd, lingering = cmd+"; sleep 1000 &", 1
			}
			r := srv.exec(t, api.ExecRequest{Command: cmd, Env: map[string]string{proctest.MarkerEnv: m}})
			if exitCode(r) != 0 || r.Stdout != fmt.Sprintf("%d\n", i) || r.Kill.Lingering != lingering {
				t.Fatalf("command %d: exit %d stdout %q kill %+v", i, exitCode(r), r.Stdout, r.Kill)
			}
		}
		const warm = 20
		for i := range warm {
			run(i)
		}
		fd0, th0 := countFDs(t, srv.pid()), threads(t, srv.pid())
		g0, hasG := srv.metric(t, "go_goroutines")
		for i := warm; i < n; i++ {
			run(i)
		}
		proctest.NoSurvivors(t, m, survivorWait)
		fd1, th1 := countFDs(t, srv.pid()), threads(t, srv.pid())
		t.Logf("server after %d commands: %d descriptors (%d after %d), %d threads (%d)", n, fd1, fd0, warm, th1, th0)
		if fd1 != fd0 {
			t.Errorf("server descriptors: %d after %d commands, %d after %d", fd1, n, fd0, warm)
		}
		// The Go runtime never ends an idle thread: the count is the high-water
		// mark of threads blocked in system calls at once, which the machine's
		// load moves by a few. A leak per command would be hundreds.
		if th1 > th0+8 {
			t.Errorf("server threads: %d after %d commands, %d after %d", th1, n, th0, warm)
		}
		if hasG {
			g1, _ := srv.metric(t, "go_goroutines")
			if g1 != g0 {
				t.Errorf("server goroutines: %v after %d commands, %v after %d", g1, n, g0, warm)
			}
		} else {
			t.Log("the server's /metrics has no go_goroutines; goroutine growth is not measured")
		}
		if z := proctest.Zombies(srv.pid()); len(z) > 0 {
			t.Errorf("%d zombie children of the server, first %v", len(z), z[0])
		}
	})
}

// countFDs counts the descriptors of process pid.
func countFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatalf("descriptors of %d: %v", pid, err)
	}
	return len(ents)
}

// threads reads the Threads line of /proc/<pid>/status.
func threads(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatalf("no Threads line for %d", pid)
	return 0
}
