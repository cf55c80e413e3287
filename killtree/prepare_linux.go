package killtree

// preparer makes the next containment of a cgroup tier ahead of time, in the
// background: the mkdirs and the limits (tens of microseconds of cgroupfs
// work) then happen while the previous command runs, off the next one's
// start. A Start takes the prepared containment if one is ready and makes
// its own otherwise; either way the containment is fresh and single-use.
type preparer struct {
	newC   func(id string) (containment, error)
	ready  chan spare         // unbuffered: the preparer waits in the send
	settle chan chan struct{} // answered once a containment is ready
	kick   chan struct{}      // buffered 1: a Start found nothing ready
	quit   chan struct{}
	done   chan struct{} // closed when run returned
}

// spare is a prepared containment and its ID.
type spare struct {
	id string
	c  containment
}

func newPreparer(newC func(id string) (containment, error)) *preparer {
	p := &preparer{newC: newC, ready: make(chan spare), settle: make(chan chan struct{}),
		kick: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *preparer) run() {
	defer close(p.done)
	for {
		sp := spare{id: newID()}
		c, err := p.newC(sp.id)
		if err != nil {
			// Start makes its own and reports the reason. Try again at
			// the next Start rather than spin on a failing mkdir.
			if !p.waitKick() {
				return
			}
			continue
		}
		sp.c = c
		if !p.offer(sp) {
			_ = c.destroy()
			return
		}
	}
}

// offer waits until a Start takes sp, answering settle requests meanwhile;
// false means quit.
func (p *preparer) offer(sp spare) bool {
	for {
		select {
		case p.ready <- sp:
			return true
		case ack := <-p.settle:
			close(ack)
		case <-p.quit:
			return false
		}
	}
}

// waitKick waits for a Start that found nothing ready, answering settle
// requests meanwhile; false means quit.
func (p *preparer) waitKick() bool {
	for {
		select {
		case <-p.kick:
			return true
		case ack := <-p.settle:
			close(ack)
		case <-p.quit:
			return false
		}
	}
}

// take returns the prepared containment, if one is ready.
func (p *preparer) take() (spare, bool) {
	select {
	case sp := <-p.ready:
		return sp, true
	default:
		select {
		case p.kick <- struct{}{}:
		default:
		}
		return spare{}, false
	}
}

// idle returns once the preparer waits with a containment ready (or after a
// failure to make one): nothing of it is in flight (tests count descriptors).
func (p *preparer) idle() {
	ack := make(chan struct{})
	select {
	case p.settle <- ack:
		<-ack
	case <-p.done:
	}
}

// close stops the preparer and removes the containment it holds.
func (p *preparer) close() {
	close(p.quit)
	<-p.done
}
