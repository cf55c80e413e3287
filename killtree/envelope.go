package killtree

// The envelope is what corral itself lives under: a container's or a
// systemd unit's pids.max and memory.max (the least over this process's
// cgroups, up each hierarchy as far as it is mounted here), and
// RLIMIT_NPROC. A command that used all of it would leave corral no task
// to make a thread with (the Go runtime aborts then: runtime/cgo:
// pthread_create failed) and no memory; so New reads the envelope once
// and every command's limit is kept below it, less a reserve corral keeps
// for itself (docs/limits.md, "The limits corral lives under").

// DefaultPidsReserve is Config.PidsReserve's default: the tasks corral
// keeps for itself below the envelope's pids limit, beyond those it uses
// when New reads it. They are its runtime's threads to come (one a
// blocking system call at a time: the waits, the reads of the cgroup
// files, the pipe scans of the way down) and, on the cgroup tiers, the
// thread trick's moves. New holds threadReserve of them as threads at
// once (see holdThreads), so that the runtime need not make one while
// a command has taken the rest.
const DefaultPidsReserve = 64

// DefaultMemoryReserve is Config.MemoryReserve's default: the memory corral
// keeps for itself below the envelope's memory limit.
const DefaultMemoryReserve = 64 << 20

// minEnvelopeMemory is the least memory share a command is held to: below
// it a shell could not start (supervisor.MinMemoryBytes), and an envelope
// that leaves less gives commands no memory limit of its own.
const minEnvelopeMemory = 16 << 20

// Envelope is what New read of the limits this process lives under, and
// the share of them every command of the Manager may have.
type Envelope struct {
	// Pids is the least task limit over this process's cgroups (pids.max,
	// cgroup v2 or v1) and, when this process is not root, RLIMIT_NPROC
	// (which the kernel does not apply to root); 0: none.
	Pids int
	// PidsSource names where Pids came from: the cgroup directory whose
	// pids.max it is, or "RLIMIT_NPROC".
	PidsSource string
	// PidsUsed is what was charged to that limit when New read it: the
	// cgroup's pids.current (this process's threads, the watchdog, and
	// whatever else the container runs), or for RLIMIT_NPROC this
	// process's threads.
	PidsUsed int
	// PidsReserve is what corral keeps for itself beyond PidsUsed
	// (Config.PidsReserve), at most half of what PidsUsed leaves free.
	PidsReserve int
	// CommandPids is the most tasks one command may have under the
	// envelope: Pids - PidsUsed - PidsReserve, at least 1; 0 when Pids is
	// 0. On a tier that enforces a pids limit (the cgroup tiers with a
	// pids controller), every command's is at most this (Tree.Bounded);
	// pgroup has none, and holds threads instead (holdThreads).
	CommandPids int

	// Memory is the least memory limit over this process's cgroups (v2
	// memory.max, v1 memory.limit_in_bytes); 0: none.
	Memory int64
	// MemorySource names the cgroup directory Memory came from.
	MemorySource string
	// MemoryReserve is what corral keeps for itself (Config.MemoryReserve).
	MemoryReserve int64
	// CommandMemory is the most memory one command may have under the
	// envelope on a tier that limits a tree's memory (the cgroup tiers):
	// Memory - MemoryReserve; 0 when Memory is 0 or leaves less than
	// 16 MiB. The pgroup tier's limit is per process (RLIMIT_AS), and it
	// is not set from the envelope.
	CommandMemory int64

	// events are the pids events files whose "max" counts the forks the
	// envelope refused: the limiting cgroup's (cgroup v2 counts there) and
	// this process's own (cgroup v1 counts a refused fork in the cgroup
	// of the task that forked, where pgroup commands run); see
	// eventsFile.
	events []string
}

// share computes the command shares from the limits read.
func (e *Envelope) share(cfg Config) {
	e.PidsReserve, e.MemoryReserve = cfg.PidsReserve, cfg.MemoryReserve
	if e.Pids > 0 {
		// A small envelope (a container of 96 tasks) is split in halves
		// rather than left to the reserve whole: a share of 1 task would
		// refuse every command (a shell needs 2, with the reaper 16).
		free := e.Pids - e.PidsUsed
		e.PidsReserve = min(e.PidsReserve, max(free/2, 0))
		e.CommandPids = max(free-e.PidsReserve, 1)
	}
	if e.Memory > 0 && e.Memory-e.MemoryReserve >= minEnvelopeMemory {
		e.CommandMemory = e.Memory - e.MemoryReserve
	}
}

// bound lowers lim (resolved: 0 is none) to the envelope's shares and
// reports which kinds it lowered: only kinds the tier enforces (pids: the
// tier enforces pids; memTree: it limits a tree's memory, as the cgroup
// tiers do).
func (e Envelope) bound(lim Limits, pids, memTree bool) (Limits, bounded) {
	var b bounded
	if pids && e.CommandPids > 0 && (lim.Pids == 0 || lim.Pids > e.CommandPids) {
		lim.Pids, b.pids = e.CommandPids, true
	}
	if memTree && e.CommandMemory > 0 && (lim.MemoryBytes == 0 || lim.MemoryBytes > e.CommandMemory) {
		lim.MemoryBytes, b.memory = e.CommandMemory, true
	}
	return lim, b
}

// bounded says which of a tree's limits the envelope set.
type bounded struct{ pids, memory bool }

// ReadEnvelope reads the limits this process lives under, as New does, for
// `corral doctor`: cfg's reserves apply (0: the defaults). It holds no
// threads, so PidsUsed counts this process as it is.
func ReadEnvelope(cfg Config) Envelope { return readEnvelope(cfg.withDefaults()) }

// Envelope returns what New read of the limits this process lives under
// and the commands' shares of them.
func (m *Manager) Envelope() Envelope { return m.env }

// Envelope returns the envelope of the Manager that started the tree.
func (t *Tree) Envelope() Envelope { return t.m.env }

// Bounded reports whether the tree's limit of that kind is the envelope's
// share (Envelope.CommandPids, CommandMemory) rather than the one asked
// for, which was higher or none.
func (t *Tree) Bounded(kind Limit) bool {
	switch kind {
	case LimitPids:
		return t.bound.pids
	case LimitMemory:
		return t.bound.memory
	}
	return false
}

// EnvelopeReached reports whether a fork was refused at the envelope's
// pids limit while the tree lived (its pids.events counters rose): on the
// pgroup tier, whose commands run in this process's own cgroup, that is
// how a command learns it ran into the container's limit. It does not say
// whose fork it was: another command's, or this process's own. Call it
// before Close.
func (t *Tree) EnvelopeReached() bool {
	if len(t.envEvents) == 0 {
		return false
	}
	now := t.m.env.refusals()
	for i, n := range now {
		if n > t.envEvents[i] {
			return true
		}
	}
	return false
}
