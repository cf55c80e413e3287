package killtree

import "sync"

// births records when each tree of a Manager lived, for Config.OwnProcess:
// an orphan reparented to this process that nothing else ties to a tree
// belongs to the one tree that was alive when it was born (its start time),
// if exactly one was. Times are clock ticks since boot, as /proc/<pid>/stat
// gives a process's start (field 22) and bootTicks reads the clock; both
// round down, so a tree's window runs from the tick before its fork to the
// tick of its end, both included, and a birth in a tick two trees share is
// ambiguous.
type births struct {
	mu     sync.Mutex
	open   map[*Tree]uint64 // tree -> its first tick; guarded by mu
	closed []window         // ended trees still needed to judge a birth; guarded by mu
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

// ended records that t is closed (or never started).
func (b *births) ended(t *Tree) {
	now := bootTicks()
	b.mu.Lock()
	defer b.mu.Unlock()
	from, ok := b.open[t]
	if !ok {
		return
	}
	delete(b.open, t)
	b.closed = append(b.closed, window{from, now})
}

// onlyIn reports whether a process born at tick born can only be t's: t was
// alive then and no other tree of the Manager was.
func (b *births) onlyIn(t *Tree, born uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	from, ok := b.open[t]
	if !ok || born < from {
		return false
	}
	for u, f := range b.open {
		if u != t && born >= f {
			return false
		}
	}
	for _, w := range b.closed {
		if born >= w.from && born <= w.to {
			return false
		}
	}
	return true
}
