package killtree

import (
	"sync"
	"time"

	"github.com/corral-sh/corral/killtree/internal/procfs"

	"golang.org/x/sys/unix"
)

// births records when each tree of a Manager lived, for Config.OwnProcess:
// an orphan reparented to this process that nothing else ties to a tree
// belongs to the one tree that was alive when it was born (its start time),
// if exactly one was. Times are clock ticks since boot, as /proc/<pid>/stat
// gives a process's start (field 22) and bootTicks reads the clock; both
// round down, so a tree's window runs from the tick before its fork to the
// tick of its end, both included, and a birth in a tick two trees share is
// ambiguous.
type births struct {
	since  uint64 // the tick the Manager began; set before any tree starts
	mu     sync.Mutex
	open   map[*Tree]uint64 // tree -> its first tick; guarded by mu
	closed []window         // ended trees that left unattributed processes, still needed to judge a birth; guarded by mu
}

type window struct{ from, to uint64 }

// opened records that t is about to start.
func (b *births) opened(t *Tree) {
	now := bootTicks()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open = map[*Tree]uint64{}
	}
	b.open[t] = now
	// A closed window matters while an open tree began before it ended.
	oldest := now
	for _, from := range b.open {
		oldest = min(oldest, from)
	}
	kept := b.closed[:0]
	for _, w := range b.closed {
		if w.to >= oldest {
			kept = append(kept, w)
		}
	}
	b.closed = kept
}

// ended records that t is closed (or never started). Its life is kept
// only when its last kill left processes born while it and another tree
// lived (Report.Unattributed): they may be t's. A tree that ended without
// them can have left no live process: its kill took every descendant, and
// its strays pass every orphan of ours born in its life and no other open
// tree's (or named it). Forgetting its life keeps a command that starts
// in the same 10 ms tick as the previous one ended from finding its own
// orphans ambiguous.
func (b *births) ended(t *Tree, leftSome bool) {
	now := bootTicks()
	b.mu.Lock()
	defer b.mu.Unlock()
	from, ok := b.open[t]
	if !ok {
		return
	}
	delete(b.open, t)
	if leftSome {
		b.closed = append(b.closed, window{from, now})
	}
}

// birth is what the trees' lives say of a process born at a tick, for
// one tree t.
type birth struct {
	during    bool // t was alive then
	otherOpen bool // a tree other than t, still open, was alive then
	closed    bool // a tree that ended leaving unattributed processes was alive then
}

// at judges a birth at tick born for t.
func (b *births) at(t *Tree, born uint64) birth {
	b.mu.Lock()
	defer b.mu.Unlock()
	var v birth
	from, ok := b.open[t]
	v.during = ok && born >= from
	for u, f := range b.open {
		if u != t && born >= f {
			v.otherOpen = true
		}
	}
	for _, w := range b.closed {
		if born >= w.from && born <= w.to {
			v.closed = true
		}
	}
	return v
}

// onlyIn reports whether a process born at tick born can only be t's: t was
// alive then and no other tree of the Manager was.
func (v birth) onlyIn() bool { return v.during && !v.otherOpen && !v.closed }

// strays ends, for Config.OwnProcess, the live orphans of this process that
// no tree claimed and that no tree still running besides t can have left:
// born after the Manager began, and before every other open tree began.
// Each was left by t or by trees that ended (born while two of them lived,
// so that no rule could tell whose). It kills and reaps them, and returns
// how many, and names those born while t and another tree still running
// lived, which it leaves: the last of those trees to end kills them.
func (t *Tree) strays(deadline time.Time) (killed int, left []Process) {
	b := &t.m.plat.births
	own := t.m.plat.own
	buf := make([]byte, 1024)
	var pids []int
	if own != nil {
		if data, err := own.ReadAll(buf); err == nil {
			pids = procfs.ParsePids(data)
		}
	} else {
		pids = procfs.Children(selfPid, 1, buf)
	}
	var victims []int
	for _, pid := range pids {
		if pid == t.pid || ownedElsewhere(pid) {
			continue
		}
		p, ok := readStat(pid, buf)
		if !ok || p.ppid != selfPid || p.zombie() || p.start < b.since {
			continue
		}
		if v := b.at(t, p.start); v.otherOpen {
			if v.during {
				left = append(left, Process{Pid: pid, Comm: procfs.Comm(pid)})
			}
			continue
		}
		victims = append(victims, pid)
	}
	for _, pid := range victims {
		// Our child, not yet reaped: the PID cannot name another
		// process until we reap it.
		if unix.Kill(pid, unix.SIGKILL) == nil {
			killed++
		}
	}
	for _, pid := range victims {
		var ru unix.Rusage // not t's usage: the stray may be another tree's
		for {
			reaped, err := reapPid(pid, &ru)
			if reaped || err != nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond) // waiting for a SIGKILLed child to exit
		}
	}
	return killed, left
}
