package killtree

import (
	"errors"
	"sync"
)

// preparer makes the next containment of a cgroup tier ahead of time, in the
// background: the mkdirs and the limits (tens of microseconds of cgroupfs
// work) then happen while the previous command runs, off the next one's
// start. A Start takes the prepared containment if one is ready and makes
// its own otherwise; either way the containment is fresh and single-use.
// The preparer is asked to restock after a start is done, not when the
// containment is taken, so that it does not compete with the start itself.
//
// It also removes the containments of closed trees: the rmdirs (tens of
// microseconds each, one per hierarchy), and for a tree Kill could not
// confirm empty the kills and waits of rmTree, then happen after Tree.Close
// returns. Removal failures are kept for Manager.Close.
//
// A single preparer (a Config.SoleTree Manager: the CLI runs one command)
// prepares the first containment only: a spare made after it would be
// made and removed for nothing. Its start waits for that one (first) when
// it is still being made, rather than make a second beside it.
type preparer struct {
	newC   func(id string) (containment, error)
	single bool
	kick   chan struct{}      // buffered 1: make a containment if none is ready
	settle chan chan struct{} // answered when idle
	quit   chan struct{}
	done   chan struct{} // closed when run returned
	first  chan struct{} // single: closed when the first fill returned, or run did
	once   sync.Once     // closes first

	mu       sync.Mutex
	next     *spare        // guarded by mu
	removals []containment // guarded by mu
	errs     []error       // removal failures; guarded by mu
	stopped  bool          // run returned: remove destroys at once; guarded by mu
	taken    bool          // a prepared containment was taken; guarded by mu
}

// spare is a prepared containment and its ID.
type spare struct {
	id string
	c  containment
}

func newPreparer(newC func(id string) (containment, error), single bool) *preparer {
	p := &preparer{newC: newC, single: single, kick: make(chan struct{}, 1), settle: make(chan chan struct{}),
		quit: make(chan struct{}), done: make(chan struct{}), first: make(chan struct{})}
	p.restock()
	go p.run()
	return p
}

func (p *preparer) run() {
	defer close(p.done)
	defer func() {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		p.removeAll()
		if sp := p.take(); sp != nil {
			_ = sp.c.destroy()
		}
	}()
	defer p.once.Do(func() { close(p.first) }) // before the take above
	for {
		select {
		case <-p.kick:
			p.removeAll()
			p.fill()
		case ack := <-p.settle:
			select {
			case <-p.kick:
				p.removeAll()
				p.fill()
			default:
			}
			close(ack)
		case <-p.quit:
			return
		}
	}
}

// remove queues c for removal; once the preparer has stopped it removes c
// at once.
func (p *preparer) remove(c containment) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return c.destroy()
	}
	p.removals = append(p.removals, c)
	p.mu.Unlock()
	p.restock()
	return nil
}

// removeAll removes the queued containments.
func (p *preparer) removeAll() {
	p.mu.Lock()
	cs := p.removals
	p.removals = nil
	p.mu.Unlock()
	for _, c := range cs {
		if err := c.destroy(); err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, err)
			p.mu.Unlock()
		}
	}
}

// fill makes a containment if none is ready. On failure Start makes its own
// and reports the reason; the next restock tries again, so a failing mkdir
// is never retried in a loop.
func (p *preparer) fill() {
	p.mu.Lock()
	done := p.next != nil || (p.single && p.taken)
	p.mu.Unlock()
	if done {
		return
	}
	if p.single {
		defer p.once.Do(func() { close(p.first) })
	}
	sp := &spare{id: newID()}
	c, err := p.newC(sp.id)
	if err != nil {
		return
	}
	sp.c = c
	p.mu.Lock()
	p.next = sp
	p.mu.Unlock()
}

// take returns the prepared containment, or nil when none is ready. A
// single preparer's first take waits for the first containment to be made
// (nil when that failed).
func (p *preparer) take() *spare {
	if p.single {
		<-p.first
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.next
	p.next = nil
	p.taken = p.taken || sp != nil
	return sp
}

// restock asks for a containment to be made if none is ready (and for the
// queued removals).
func (p *preparer) restock() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// idle returns once the preparer has nothing in flight: queued removals done
// and the next containment made (tests count descriptors and leaves).
func (p *preparer) idle() {
	ack := make(chan struct{})
	select {
	case p.settle <- ack:
		<-ack
	case <-p.done:
	}
}

// close stops the preparer, removes what is queued and the containment it
// holds, and returns the removal failures.
func (p *preparer) close() error {
	close(p.quit)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
}
