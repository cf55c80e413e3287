package killtree

import (
	"os/exec"
	"time"
)

// Limits asks for the resource limits of one containment (StartLimited).
// A zero field takes the Manager's Config value (MemoryMax, CPUs, PidsMax);
// a negative one asks for no limit of that kind.
type Limits struct {
	// MemoryBytes caps the memory of the whole tree, in bytes.
	MemoryBytes int64
	// CPUs caps the CPU time of the whole tree, in CPUs (0.5: half of one
	// CPU's time per period).
	CPUs float64
	// Pids caps the tasks (threads included) of the whole tree.
	Pids int
}

// resolve returns the limits a containment gets: zero fields take cfg's
// (cfg has its defaults applied), and in the result 0 means none.
func (l Limits) resolve(cfg Config) Limits {
	out := Limits{MemoryBytes: cfg.MemoryMax, CPUs: cfg.CPUs, Pids: cfg.PidsMax}
	if l.MemoryBytes != 0 {
		out.MemoryBytes = l.MemoryBytes
	}
	if l.CPUs != 0 {
		out.CPUs = l.CPUs
	}
	if l.Pids != 0 {
		out.Pids = l.Pids
	}
	out.MemoryBytes = max(out.MemoryBytes, 0)
	out.CPUs = max(out.CPUs, 0)
	out.Pids = max(out.Pids, 0)
	return out
}

// config returns cfg carrying l (resolved) as its limits, for the
// containment constructors, which read the limits from a Config.
func (l Limits) config(cfg Config) Config {
	cfg.MemoryMax, cfg.CPUs, cfg.PidsMax = l.MemoryBytes, l.CPUs, l.Pids
	if cfg.PidsMax == 0 {
		cfg.PidsMax = -1 // none: Config's 0 would mean the default
	}
	return cfg
}

// Limit names a kind of limit: what a tree ran into (Tree.Reached), or what
// a tier does not enforce (Tree.NotEnforced).
type Limit string

// The kinds of limit.
const (
	// LimitMemory: on the cgroup tiers the kernel's OOM killer fired in the
	// containment (v2 memory.events oom_kill; v1 memory.oom_control
	// oom_kill, or the OOM notification that made killtree kill the tree).
	LimitMemory Limit = "memory"
	// LimitCPUs is never reached: a CPU quota slows the tree, it does not
	// end it.
	LimitCPUs Limit = "cpus"
	// LimitPids: a fork was refused at the containment's pids.max (v2 or v1
	// pids.events "max").
	LimitPids Limit = "pids"
)

// Usage is what a tree used, summed over the whole tree where the source
// allows it.
type Usage struct {
	// CPUUser and CPUSystem are the CPU time spent in user and kernel mode:
	// from the cgroup (v2 cpu.stat user_usec/system_usec on the cgroup2
	// tier, v1 cpuacct.usage_user/usage_sys on cgroup1) when it has them,
	// else the rusage of the reaped processes: the shell (which includes
	// every descendant it or its descendants waited for) plus the orphans
	// killtree reaped (Linux), or the job's accounting (Windows).
	CPUUser, CPUSystem time.Duration
	// PeakMemory is the high-water mark of memory in bytes: the whole
	// tree's from the cgroup (v2 memory.peak, v1
	// memory.max_usage_in_bytes: a memory leaf exists when a memory limit
	// applies), which counts page cache the tree caused; on Windows the
	// job's peak committed memory; else the largest peak resident set of
	// any one reaped process (rusage maxrss), which undercounts a tree
	// whose processes peaked apart. On that last path the leader's own
	// maxrss counts only when it exceeds this process's peak: the leader is
	// started sharing this process's memory (vfork), and exec records that
	// memory's peak as the leader's, so a smaller value says nothing; a
	// tree of small processes that all exited under their parents then
	// reports 0 (unknown).
	PeakMemory int64
	// CPUFromCgroup and MemoryFromCgroup say which source the fields came
	// from (true: the containment's own accounting).
	CPUFromCgroup, MemoryFromCgroup bool
}

// StartLimited is Start with per-command limits: l's zero fields take the
// Config's. A containment prepared ahead of time with the Config's limits
// has its limit files rewritten before the start (a few microseconds a
// file); one that lacks a leaf the limits need (a memory limit where the
// Config has none, on a host whose memory controller is cgroup v1) is
// replaced by a fresh one.
func (m *Manager) StartLimited(cmd *exec.Cmd, l Limits) (*Tree, error) {
	return m.start(cmd, l.resolve(m.cfg))
}

// Limits returns the limits the tree was started with (0: none of that
// kind), whether or not its tier enforces them (see NotEnforced).
func (t *Tree) Limits() Limits { return t.lim }

// NotEnforced lists the limits the tree was started with that its tier
// does not enforce on this machine (pgroup: cpus and pids; a cgroup tier
// on a host without that controller), in the order memory, cpus, pids.
// Memory on pgroup counts as enforced, though per process (RLIMIT_AS)
// rather than per tree.
func (t *Tree) NotEnforced() []Limit {
	var out []Limit
	mem, cpu, pids := t.m.plat.enforces()
	if t.lim.MemoryBytes > 0 && !mem {
		out = append(out, LimitMemory)
	}
	if t.lim.CPUs > 0 && !cpu {
		out = append(out, LimitCPUs)
	}
	if t.lim.Pids > 0 && !pids {
		out = append(out, LimitPids)
	}
	return out
}

// Reached names the limit the tree ran into, or "" for none: its
// containment's, or, for pids, the envelope's (a fork refused at the limit
// this process lives under while the tree lived: EnvelopeReached). Call it
// after the tree ended (Kill) and before Close, which removes the
// containment that remembers it. Memory wins when both were reached.
func (t *Tree) Reached() Limit {
	if t.oomSeen.Load() {
		return LimitMemory
	}
	if a, ok := t.c.(accountant); ok {
		if r := a.reached(); r != "" {
			return r
		}
	}
	if t.EnvelopeReached() {
		return LimitPids
	}
	return ""
}

// Usage returns what the tree used so far (see Usage for the sources).
// The rusage fields are complete once the caller has reaped the leader
// (cmd.Wait) and Kill reaped the rest; the cgroup fields can be read while
// the tree runs. Call it before Close, which removes the containment.
func (t *Tree) Usage() Usage {
	var u Usage
	if a, ok := t.c.(accountant); ok {
		u = a.usage()
	}
	if u.CPUFromCgroup && u.MemoryFromCgroup {
		return u
	}
	r := t.rusage()
	if !u.CPUFromCgroup {
		u.CPUUser, u.CPUSystem = r.CPUUser, r.CPUSystem
	}
	if !u.MemoryFromCgroup {
		u.PeakMemory = r.PeakMemory
	}
	return u
}

// LiveUsage is Usage for a tree that may still run, safe to call at any
// time and concurrently with the caller's cmd.Wait: the containment's
// accounting where it has one, and for what it lacks, the rusage of the
// orphans killtree reaped so far (not the leader's, whose status the
// caller owns). After Close it reads nothing of the removed containment.
func (t *Tree) LiveUsage() Usage {
	var u Usage
	if a, ok := t.c.(accountant); ok {
		u = a.usage()
	}
	t.mu.Lock()
	r := t.reaped
	t.mu.Unlock()
	if !u.CPUFromCgroup {
		u.CPUUser, u.CPUSystem = r.CPUUser, r.CPUSystem
	}
	if !u.MemoryFromCgroup {
		u.PeakMemory = r.PeakMemory
	}
	return u
}

// accountant is a containment that keeps its own accounting (the cgroup
// tiers, the job tier).
type accountant interface {
	// reached names the limit the containment ran into, or "".
	reached() Limit
	// usage reads the containment's accounting; the From flags say which
	// fields it has.
	usage() Usage
}

// oomWatcher is a containment that learns of an OOM kill only by a
// notification (cgroup v1 has no memory.oom.group): Start arms the watch and
// the tree kills itself whole when it fires.
type oomWatcher interface {
	// oomEvents returns a file that turns readable at an OOM in the
	// containment, or nil; the Tree closes it.
	oomEvents() readCloser
}

// readCloser is the part of *os.File the OOM watch uses.
type readCloser interface {
	Read([]byte) (int, error)
	Close() error
}

// watchOOM starts the OOM watch of a containment that needs one: on the
// notification, the tree is killed whole at once, as memory.oom.group does
// on cgroup v2. stopOOMWatch ends it.
func (t *Tree) watchOOM() {
	w, ok := t.c.(oomWatcher)
	if !ok {
		return
	}
	f := w.oomEvents()
	if f == nil {
		return
	}
	t.oomFile = f
	t.oomWG.Add(1)
	go func() {
		defer t.oomWG.Done()
		var buf [8]byte
		if _, err := f.Read(buf[:]); err != nil {
			return // closed by stopOOMWatch
		}
		t.oomSeen.Store(true)
		t.killMu.Lock()
		defer t.killMu.Unlock()
		rep, _ := t.killByLocked(time.Now().Add(killDeadline)) // the way down's own Kill reports what it leaves
		t.oomKilled.Store(int64(rep.Processes))
	}()
}

// stopOOMWatch closes the watch's file and waits for its goroutine (which
// may be killing the tree).
func (t *Tree) stopOOMWatch() {
	if t.oomFile == nil {
		return
	}
	_ = t.oomFile.Close()
	t.oomWG.Wait()
}

// OOMKilled is how many processes killtree killed when the OOM watch fired
// (cgroup v1: the tree is killed at the OOM notification, OOMCorral): a
// Kill after that finds them gone. 0 without an OOM or where the kernel
// killed the tree. Read it after Kill, which waits for the watch's own
// kill (both hold the tree's kill lock).
func (t *Tree) OOMKilled() int {
	t.killMu.Lock()
	defer t.killMu.Unlock()
	return int(t.oomKilled.Load())
}

// OOMKiller says who killed the tree at an OOM (meaningful when Reached
// is LimitMemory): OOMKernelTree (cgroup v2 memory.oom.group: the kernel
// killed the whole containment), OOMCorral (cgroup v1: killtree killed the
// tree at the OOM notification), or OOMKernelProcess (the kernel killed a
// process of it, and the rest ended otherwise).
func (t *Tree) OOMKiller() OOMKiller {
	if g, ok := t.c.(interface{ oomGroup() bool }); ok && g.oomGroup() {
		return OOMKernelTree
	}
	if t.oomSeen.Load() {
		return OOMCorral
	}
	return OOMKernelProcess
}

// OOMKiller names who killed a tree that reached its memory limit.
type OOMKiller int

// Who killed a tree at an OOM (Tree.OOMKiller).
const (
	OOMKernelProcess OOMKiller = iota
	OOMKernelTree
	OOMCorral
)
