package supervisor

import (
	"sync"
	"time"
)

// Job event kinds.
const (
	// JobEventExited: the job ended; Result is its Result.
	JobEventExited = "exited"
	// JobEventWaiting: a process of the job blocks reading its stdin or
	// terminal; Waiting says which and for what (once per wait).
	JobEventWaiting = "waiting"
)

// JobEvent is one event of a background job, as GET /v1/events streams it.
type JobEvent struct {
	Event string    `json:"event"`
	JobID string    `json:"jobId"`
	Owner string    `json:"-"`
	At    time.Time `json:"at"`
	// Result is an exited job's Result.
	Result *Result `json:"result,omitempty"`
	// Waiting is the wait a waiting event announces.
	Waiting *Waiting `json:"waiting,omitempty"`
}

// jobEventBuffer is how many events a subscriber may fall behind before
// the oldest unread one is dropped (Dropped counts them).
const jobEventBuffer = 256

// jobFeed fans job events out to subscribers. Publishing never blocks: a
// subscriber that does not keep up loses its oldest events, and knows it.
type jobFeed struct {
	mu   sync.Mutex
	subs map[*JobEvents]struct{} // guarded by mu
}

// JobEvents is a subscription to job events; read C, and Close it when done.
type JobEvents struct {
	// C receives the events in the order they happened.
	C     <-chan JobEvent
	c     chan JobEvent
	owner string
	all   bool
	feed  *jobFeed

	mu      sync.Mutex
	dropped int // guarded by mu
}

// Subscribe subscribes to the events of the jobs whose Owner is owner,
// or of every job when all is set. Events that happen before it returns are
// not delivered. Close the subscription when done.
func (h *Jobs) Subscribe(owner string, all bool) *JobEvents {
	s := h.s
	c := make(chan JobEvent, jobEventBuffer)
	e := &JobEvents{C: c, c: c, owner: owner, all: all, feed: &s.jobs.feed}
	s.jobs.feed.mu.Lock()
	if s.jobs.feed.subs == nil {
		s.jobs.feed.subs = map[*JobEvents]struct{}{}
	}
	s.jobs.feed.subs[e] = struct{}{}
	s.jobs.feed.mu.Unlock()
	return e
}

// Close ends the subscription; C receives nothing more. Safe to call twice.
func (e *JobEvents) Close() {
	e.feed.mu.Lock()
	delete(e.feed.subs, e)
	e.feed.mu.Unlock()
}

// Dropped counts the events this subscriber lost because it fell behind.
func (e *JobEvents) Dropped() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropped
}

// Publish hands ev to the subscribers of its job's owner. It never
// blocks. The supervisor publishes exits and waits itself.
func (h *Jobs) Publish(ev JobEvent) { h.s.jobs.feed.publish(ev) }

func (f *jobFeed) publish(ev JobEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for e := range f.subs {
		if !e.all && e.owner != ev.Owner {
			continue
		}
		for {
			select {
			case e.c <- ev:
			default:
				// Full: drop the oldest and try again.
				select {
				case <-e.c:
					e.mu.Lock()
					e.dropped++
					e.mu.Unlock()
				default:
				}
				continue
			}
			break
		}
	}
}
