//go:build linux

package integration

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// survivorWait is how long NoSurvivors polls after a call returned. corral
// confirms the tree empty before it returns, so this only covers the moment
// a killed process spends leaving /proc.
const survivorWait = 200 * time.Millisecond

// processOracles takes the test process's descriptor count and returns the
// check to defer: no zombie child of the test process and the descriptor
// count back where it started. Call it from a test that is not parallel and
// whose subtests have all finished when the check runs (t.Run of a group
// returns only after its parallel subtests).
//
// The zombies it reports are then reaped by PID, so that one failing test
// does not fail the next: top-level tests run one at a time, so no other
// test has a child that Wait could lose.
func processOracles(t *testing.T) func() {
	t.Helper()
	fd0 := proctest.FDCount(t)
	return func() {
		t.Helper()
		zs := proctest.Zombies(os.Getpid())
		for i, z := range zs {
			if i < 5 {
				t.Errorf("zombie child of the test process: %v", z)
			}
			var ws unix.WaitStatus
			_, _ = unix.Wait4(z.PID, &ws, unix.WNOHANG, nil) // Reaped; an error means already gone.
		}
		if len(zs) > 0 {
			t.Errorf("%d zombie children of the test process in all (reaped now)", len(zs))
		}
		if fd := proctest.FDCount(t); fd != fd0 {
			t.Errorf("test process holds %d descriptors, %d before the scenarios: %s", fd, fd0, fdList())
		}
	}
}

// fdList names the test process's descriptors for a failure message.
func fdList() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"->"+l)
	}
	return strings.Join(out, " ")
}

// marker returns a fresh marker value for one call.
func marker(t testing.TB) string {
	_, v := proctest.Marker(t)
	return v
}

// checkGone is the per-call oracle: nothing carrying the marker is alive.
func checkGone(t *testing.T, m string) {
	t.Helper()
	proctest.NoSurvivors(t, m, survivorWait)
}

// warmUp starts and closes one Supervisor so that process-wide state that
// lives as long as the test process (containment detection, the child
// subreaper flag, the runtime's poller descriptors) exists before the first
// descriptor count.
func warmUp(t *testing.T) {
	t.Helper()
	sup, err := supervisor.New(supervisor.Config{})
	if err != nil {
		t.Fatalf("supervisor.New: %v", err)
	}
	if err := sup.Close(); err != nil {
		t.Fatalf("supervisor Close: %v", err)
	}
}
