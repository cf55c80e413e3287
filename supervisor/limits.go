package supervisor

import (
	"fmt"
	"math"
	"runtime"
	"strconv"

	"github.com/corral-sh/corral/killtree"
)

// Resource limit bounds. A request's limits must lie within these and at
// most the supervisor's own (Config.Containment: MemoryMax, CPUs,
// PidsMax), which are also the defaults.
const (
	// MinMemoryBytes is the smallest memory limit a command may ask for:
	// bash and a small tool start in a few MiB, and a cgroup charges the
	// kernel memory of its processes too (page tables, the exec'd
	// binary's page cache). Below it even `true` could be OOM-killed.
	MinMemoryBytes = 16 << 20
	// MinCPUs is the smallest CPU limit: 1 ms of CPU time per 100 ms
	// period, the smallest quota the kernel takes.
	MinCPUs = 0.01
	// MinPids is the smallest task limit: the shell, and the task the
	// start forks it from (measured on the cgroup tiers: with pids.max 1
	// the start itself fails, EAGAIN; with 2 `true` runs).
	MinPids = 2
	// minPidsReaper is the smallest task limit with killtree.Config.Reaper:
	// the reaper is a Go program, and its runtime's threads count too
	// (measured: `true` failed, runtime/cgo: pthread_create failed, up to 8
	// tasks on a 2-CPU machine, and ran with 12).
	minPidsReaper = 16
)

// minPids is the least task limit a command of a Supervisor with this
// containment can start under.
func minPids(c killtree.Config) int {
	if c.Reaper {
		return minPidsReaper
	}
	return MinPids
}

// Limits asks for the resource limits of one command, enforced by its
// containment (docs/limits.md). A zero field takes the
// supervisor's default (Config.Containment's MemoryMax, CPUs, PidsMax); a
// request may lower a default, never raise it, and where the supervisor has
// none it may set one.
type Limits struct {
	// MemoryBytes caps the memory of the whole tree; at least
	// MinMemoryBytes.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// CPUs caps the CPU time of the whole tree, in CPUs (0.5 is half of
	// one CPU); between MinCPUs and the machine's CPU count.
	CPUs float64 `json:"cpus,omitempty"`
	// Pids caps the tasks (threads included) of the whole tree.
	Pids int `json:"pids,omitempty"`
}

// Usage is what a command's whole tree used (Result.Usage). Its sources:
// the containment's own accounting where the tier has it (cgroup v2
// cpu.stat and memory.peak, v1 cpuacct and memory.max_usage_in_bytes, the
// Windows job's), else the rusage of the reaped processes, in which
// PeakMemoryBytes is the largest single process's peak resident set, not
// the tree's (see killtree.Usage).
type Usage struct {
	CPUUserMs       int64 `json:"cpuUserMs"`
	CPUSystemMs     int64 `json:"cpuSystemMs"`
	PeakMemoryBytes int64 `json:"peakMemoryBytes"`
}

func usageOf(u killtree.Usage) *Usage {
	return &Usage{CPUUserMs: u.CPUUser.Milliseconds(), CPUSystemMs: u.CPUSystem.Milliseconds(), PeakMemoryBytes: u.PeakMemory}
}

// ceilings returns the supervisor's limits (0: none of that kind).
func (s *Supervisor) ceilings() Limits {
	c := s.cfg.Containment
	pids := c.PidsMax
	if pids == 0 {
		pids = killtree.DefaultPidsMax
	}
	return Limits{MemoryBytes: max(c.MemoryMax, 0), CPUs: max(c.CPUs, 0), Pids: max(pids, 0)}
}

// checkLimits validates a request's limits against the bounds and the
// supervisor's ceilings; its error is a reason for a RequestError.
func (s *Supervisor) checkLimits(l Limits) error {
	ceil := s.ceilings()
	switch m := l.MemoryBytes; {
	case m < 0:
		return fmt.Errorf("limits.memoryBytes must be positive, got %d", m)
	case m > 0 && m < MinMemoryBytes:
		return fmt.Errorf("limits.memoryBytes must be at least %d (%s), enough for a shell to start, got %d", MinMemoryBytes, sizeString(MinMemoryBytes), m)
	case m > 0 && ceil.MemoryBytes > 0 && m > ceil.MemoryBytes:
		return fmt.Errorf("limits.memoryBytes must be at most %d (%s), the server's limit, got %d", ceil.MemoryBytes, sizeString(ceil.MemoryBytes), m)
	}
	switch c, n := l.CPUs, float64(runtime.NumCPU()); {
	case math.IsNaN(c) || math.IsInf(c, 0) || c < 0:
		return fmt.Errorf("limits.cpus must be a positive number, got %v", c)
	case c > 0 && c < MinCPUs:
		return fmt.Errorf("limits.cpus must be at least %g, got %g", MinCPUs, c)
	case c > 0 && ceil.CPUs > 0 && c > ceil.CPUs:
		return fmt.Errorf("limits.cpus must be at most %g, the server's limit, got %g", ceil.CPUs, c)
	case c > n:
		return fmt.Errorf("limits.cpus must be at most %g, the CPUs of this machine, got %g", n, c)
	}
	switch p := l.Pids; {
	case p < 0:
		return fmt.Errorf("limits.pids must be positive, got %d", p)
	case p > 0 && p < minPids(s.cfg.Containment):
		return fmt.Errorf("limits.pids must be at least %d, the tasks a shell needs to start here, got %d", minPids(s.cfg.Containment), p)
	case p > 0 && ceil.Pids > 0 && p > ceil.Pids:
		return fmt.Errorf("limits.pids must be at most %d, the server's limit, got %d", ceil.Pids, p)
	}
	return nil
}

// checkOwnLimits validates a supervisor's own limits (Config.Containment)
// by the same bounds a request's are held to; New calls it. Its error is a
// *RequestError (ErrInvalidRequest), so that a CLI whose flags set them can
// report it as bad input.
func checkOwnLimits(c killtree.Config) error {
	bad := func(format string, args ...any) error {
		return &RequestError{Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.MemoryMax < 0:
		return bad("memory limit must be 0 (none) or positive, got %d", c.MemoryMax)
	case c.MemoryMax > 0 && c.MemoryMax < MinMemoryBytes:
		return bad("memory limit must be at least %s, enough for a shell to start, got %d bytes", sizeString(MinMemoryBytes), c.MemoryMax)
	case math.IsNaN(c.CPUs) || math.IsInf(c.CPUs, 0) || c.CPUs < 0:
		return bad("cpus must be 0 (none) or positive, got %v", c.CPUs)
	case c.CPUs > 0 && c.CPUs < MinCPUs:
		return bad("cpus must be at least %g, got %g", MinCPUs, c.CPUs)
	case c.CPUs > float64(runtime.NumCPU()):
		return bad("cpus must be at most %d, the CPUs of this machine, got %g", runtime.NumCPU(), c.CPUs)
	case c.PidsMax > 0 && c.PidsMax < minPids(c):
		return bad("pids limit must be 0 (none) or at least %d, the tasks a shell needs to start here, got %d", minPids(c), c.PidsMax)
	}
	return nil
}

// limitNote is the stderr line of a command that ran into a limit: its
// own, or the one corral lives under (the envelope: docs/limits.md, "The
// limits corral lives under").
func limitNote(reached killtree.Limit, t *killtree.Tree) string {
	lim, env := t.Limits(), t.Envelope()
	switch reached {
	case killtree.LimitMemory:
		who := map[killtree.OOMKiller]string{
			killtree.OOMKernelTree:    "the kernel killed the process tree",
			killtree.OOMCorral:        "corral killed the process tree",
			killtree.OOMKernelProcess: "the kernel killed a process of the tree",
		}[t.OOMKiller()]
		if t.Bounded(killtree.LimitMemory) {
			return fmt.Sprintf("[corral: the container's memory limit (%s) was reached: corral keeps %s of it for itself, so the command could have %s; %s.]",
				sizeString(env.Memory), sizeString(env.MemoryReserve), sizeString(lim.MemoryBytes), who)
		}
		return fmt.Sprintf("[corral: the memory limit (%s) was reached; %s.]", sizeString(lim.MemoryBytes), who)
	case killtree.LimitPids:
		switch {
		case t.Bounded(killtree.LimitPids):
			return fmt.Sprintf("[corral: %s was reached: corral keeps %s of them for itself and for what already ran there, so the command could have %s; the kernel refused at least one fork.]",
				envelopePids(env), thousands(env.PidsUsed+env.PidsReserve), thousands(lim.Pids))
		case t.EnvelopeReached():
			return fmt.Sprintf("[corral: %s was reached while the command ran; the kernel refused at least one fork.]", envelopePids(env))
		}
		return fmt.Sprintf("[corral: the process limit (%d tasks) was reached; the kernel refused at least one fork.]", lim.Pids)
	}
	return ""
}

// envelopePids names the task limit corral lives under: "the container's
// process limit (1,500 tasks)".
func envelopePids(env killtree.Envelope) string {
	if env.PidsSource == "RLIMIT_NPROC" {
		return "the user's process limit (RLIMIT_NPROC, " + thousands(env.Pids) + " tasks)"
	}
	return "the container's process limit (" + thousands(env.Pids) + " tasks)"
}

// thousands formats n with commas between groups of three digits: "1,500".
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// sizeString formats a byte count with the largest binary unit it holds
// at least one of, to two decimals at most: "256 MiB", "1.5 GiB", "1000
// bytes".
func sizeString(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			v := math.Round(float64(n)/float64(u.size)*100) / 100
			return strconv.FormatFloat(v, 'f', -1, 64) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
