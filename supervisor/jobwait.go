package supervisor

import (
	"sync"
	"time"
)

// A job's waits: the watch publishes them on the job (setWaiting), readers
// see them in JobInfo, JobOutput and a yield's Result, and subscribers
// (OnWaiting) hear of each once.

// startWatch starts the waiting watch of job j, whose command p just
// started. The job's supervising goroutine closes it.
func (s *Supervisor) startWatch(j *job, p *proc) {
	w := j.watch
	w.tree = p.tree
	w.outs = p.outs.dupReadEnds()
	w.set = func(wt *Waiting) { s.setWaiting(j, p, wt) }
	p.atEnd = func(end ending) {
		if end == endTimedOut {
			p.waitAtEnd, _ = j.currentWait()
		}
	}
	switch {
	case p.term != nil:
		w.tgt = inputTarget{ttyPath: p.term.path, ttyDev: p.term.dev}
		w.kind = p.term.kind
		w.prompt = func() string {
			p.screen.update(p.out, p.term.getSize())
			return p.screen.snapshot().promptLine()
		}
	default:
		w.stdin = p.stdinW
		w.tgt = inputTarget{pipeLink: pipeLink(p.stdinW)}
		w.prompt = func() string { return lastLinePrompt(p.out, p.err) }
	}
	go w.run()
}

// setWaiting publishes a wait that began (w) or ended (nil) on j: readers
// are woken, and a wait that began goes to the subscribers and to the
// command's live events.
func (s *Supervisor) setWaiting(j *job, p *proc, w *Waiting) {
	j.mu.Lock()
	j.waiting = w
	if w != nil {
		j.waits++
	}
	j.mu.Unlock()
	j.poke()
	if w == nil {
		return
	}
	p.live.note(Event{Event: EventWaiting, Waiting: w})
	s.waitHooks.each(func(f func(string, Waiting)) { f(j.id, *w) })
	s.jobs.mu.Lock()
	listed := j.listed // a yielding command is a job only once handed over
	s.jobs.mu.Unlock()
	if listed {
		ev := *w
		s.jobs.feed.publish(JobEvent{Event: JobEventWaiting, JobID: j.id, Owner: j.owner, At: time.Now(), Waiting: &ev})
	}
}

// currentWait returns a copy of j's current wait (nil when none) and how
// many waits it had so far.
func (j *job) currentWait() (*Waiting, uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.waiting == nil {
		return nil, j.waits
	}
	w := *j.waiting
	return &w, j.waits
}

// size returns a copy of the job's terminal size; nil for pipes.
func (j *job) size() *TTYSize {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.tty == nil {
		return nil
	}
	sz := *j.tty
	return &sz
}

// OnWaiting registers f to hear of every wait of every job once, as it
// begins: the job's ID and the wait. f is called from the job's watch and
// must not block; remove unregisters it (after it returns, f is not called
// again). Safe for concurrent use.
func (h *Jobs) OnWaiting(f func(jobID string, w Waiting)) (remove func()) {
	return h.s.waitHooks.add(f)
}

// hooks is a set of callbacks, safe for concurrent use.
type hooks[F any] struct {
	mu   sync.RWMutex
	next int
	fs   map[int]F // guarded by mu
}

func (h *hooks[F]) add(f F) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fs == nil {
		h.fs = map[int]F{}
	}
	id := h.next
	h.next++
	h.fs[id] = f
	return func() {
		h.mu.Lock()
		delete(h.fs, id)
		h.mu.Unlock()
	}
}

// each calls fn with every callback, holding the set for reading (a remove
// waits for it).
func (h *hooks[F]) each(fn func(F)) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, f := range h.fs {
		fn(f)
	}
}
