package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// The Go heap may grow to twice what it holds before it collects
// (GOGC=100); a burst of jobs then takes the server's memory far past what
// its caps hold live (issue 25: +162 MiB at the peak for +63 MiB held). The
// servers therefore set the runtime's soft memory limit from the caps they
// enforce (docs/memory.md): the Go memory in use when the server starts,
// plus the cap on the exited jobs' memory (--max-retained-bytes), plus
// runningRoom for what the commands running at the moment hold (their
// capture buffers, pipes' read buffers, requests) and the collector's
// slack. The target is the cap + 32 MiB at the peak; the room is 8 MiB
// less, a margin for the runtime, which passes a soft limit by a few MiB
// under a burst of large allocations (the jobs' 512 KiB rings) and by more
// when the collector gets little CPU. Since the byte cap holds while the
// running jobs' buffers grow, the peak under churn follows the limit:
// +89.5 MiB with 32 MiB of room, +81.5 MiB with 24 (docs/memory.md).
// Never above 90 % of the memory.max of the cgroup corral lives in
// (up the tree; cgroup v1's memory.limit_in_bytes). A GOMEMLIMIT in the
// environment is the operator's and is left alone. The limit is soft: past
// it the runtime collects more often (at most half the CPU time, its
// limiter), it does not fail allocations.
const runningRoom = 24 << 20

// memLimit is the soft memory limit a server runs under.
type memLimit struct {
	bytes     int64  // the limit in effect
	source    string // what set it: "caps", "container" or "GOMEMLIMIT"
	caps      int64  // base + retained + runningRoom
	container int64  // the memory.max corral lives under; 0 when none
}

func (l memLimit) String() string {
	s := fmt.Sprintf("%s (%s)", mib(l.bytes), l.source)
	if l.container > 0 {
		s += fmt.Sprintf("; the container's memory.max is %s", mib(l.container))
	}
	return s
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// planMemoryLimit computes the limit for a server whose exited jobs may
// hold retained bytes, without setting it.
func planMemoryLimit(retained int64) memLimit {
	return memoryLimitOf(goMemoryInUse(), retained, containerMemory(), os.Getenv("GOMEMLIMIT") != "")
}

// memoryLimitOf is the limit for a server holding base bytes of Go memory
// now, whose exited jobs may hold retained bytes, in a cgroup tree whose
// least memory limit is container (0: none); fromEnv: GOMEMLIMIT is set.
func memoryLimitOf(base, retained, container int64, fromEnv bool) memLimit {
	l := memLimit{container: container, caps: base + retained + runningRoom}
	switch {
	case fromEnv:
		l.bytes, l.source = debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	case container > 0 && container/10*9 < l.caps:
		l.bytes, l.source = container/10*9, "container"
	default:
		l.bytes, l.source = l.caps, "caps"
	}
	return l
}

// setMemoryLimit sets the limit planMemoryLimit computes (unless
// GOMEMLIMIT set one) and returns it.
func setMemoryLimit(retained int64) memLimit {
	l := planMemoryLimit(retained)
	if l.source != "GOMEMLIMIT" {
		debug.SetMemoryLimit(l.bytes)
	}
	return l
}

// goMemoryInUse is the memory the Go runtime holds from the system and
// has not returned: what its soft limit counts.
func goMemoryInUse() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
