package proctest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// MarkerEnv is the environment variable that carries a test's marker (see Marker).
const MarkerEnv = "CORRAL_TEST_MARKER"

// markerSeq makes markers unique within one process even if the random source repeats.
var markerSeq atomic.Uint64

// Marker returns a fresh environment entry "CORRAL_TEST_MARKER=<value>" and its value. Add the
// entry to the environment of every command a test starts; descendants inherit it, so
// Survivors(value) finds whatever the test left running. Each call returns a new value, which
// holds only [0-9a-z-] and so needs no shell quoting. It is safe for concurrent use.
func Marker(t testing.TB) (entry, value string) {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("proctest: marker: %v", err)
	}
	value = fmt.Sprintf("pt-%d-%d-%s", os.Getpid(), markerSeq.Add(1), hex.EncodeToString(b[:]))
	return MarkerEnv + "=" + value, value
}

// Proc describes a process found by Survivors or Zombies.
type Proc struct {
	PID, PPID int
	// State is the one-letter state from /proc/<pid>/stat: R, S, D, T, Z, ...
	State string
	// Comm is the command name from /proc/<pid>/stat.
	Comm string
	// Cmdline is /proc/<pid>/cmdline with the NUL separators turned into spaces; empty for
	// zombies and kernel threads.
	Cmdline string
}

// Zombie reports whether p is a zombie (state Z).
func (p Proc) Zombie() bool { return p.State == "Z" }

// String formats p for test failure messages.
func (p Proc) String() string {
	return fmt.Sprintf("pid %d ppid %d state %s comm %q cmdline %q", p.PID, p.PPID, p.State, p.Comm, p.Cmdline)
}

// AtLeast polls Survivors(value) every 10 ms until it lists n processes (not
// counting those for which skip, when not nil, reports true) or within has
// passed, and returns the last list. A process in the middle of an exec shows
// no environment for a moment, so a single scan may miss a member of a tree
// that is complete.
func AtLeast(value string, n int, within time.Duration, skip func(Proc) bool) []Proc {
	deadline := time.Now().Add(within)
	for {
		var found []Proc
		for _, p := range Survivors(value) {
			if skip == nil || !skip(p) {
				found = append(found, p)
			}
		}
		if len(found) >= n || !time.Now().Before(deadline) {
			return found
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}
