package supervisor

import (
	"sync"

	"github.com/corral-sh/corral/internal/utf8cut"
)

// Event kinds, as in docs/wire.md's live events.
const (
	EventStart  = "start"
	EventOutput = "output"
	EventCapped = "capped"
	EventResult = "result"
	// EventWaiting: the command began to wait for input (Event.Waiting),
	// once per wait.
	EventWaiting = "waiting"
)

// A Stream names an output stream of a command as the wire spells it
// (JobOutput.Stream, Event.Stream, the stream of a job read).
type Stream string

// The streams. A terminal job has one, Stdout.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// streamIndex says which output stream of the command a chunk, a pipe or a
// cursor belongs to; it indexes the per-stream arrays ([2]…) of outputs,
// live and job.
type streamIndex int

const (
	stdoutStream streamIndex = iota
	stderrStream
)

// String returns the stream's name, Stdout or Stderr.
func (i streamIndex) String() string { return string(i.stream()) }

// stream returns the stream, Stdout or Stderr.
func (i streamIndex) stream() Stream {
	if i == stderrStream {
		return Stderr
	}
	return Stdout
}

// DefaultLiveCap is how many bytes of each stream live events carry before
// one capped event ends that stream's live output.
const DefaultLiveCap = 512 << 10

// maxEventData bounds one output event's data; a slow callback sees several
// coalesced events of up to this size rather than one huge one.
const maxEventData = 64 << 10

// Event is one live event. It marshals to one NDJSON line (docs/wire.md, Live events):
// start carries Pid; output carries Stream, Seq and Data; capped carries
// Stream and Seq; result carries Result. Seq counts each stream separately
// from 1 without gaps; capped takes the next seq of its stream.
type Event struct {
	Event  string `json:"event"`
	Pid    int    `json:"pid,omitempty"`
	Stream Stream `json:"stream,omitempty"`
	Seq    int64  `json:"seq,omitempty"`
	Data   string `json:"data,omitempty"`
	// Waiting is what a waiting event says the command waits for.
	Waiting *Waiting `json:"waiting,omitempty"`
	Result  *Result  `json:"result,omitempty"`
}

// live carries output from the drain goroutines to the event callback. The
// drain side only appends under a mutex and never waits for the callback;
// one dispatcher goroutine calls the callback, so events are delivered in
// order and one at a time. Bytes past the cap are not queued: the stream's
// live output then ends with one capped event.
type live struct {
	cb  func(Event)
	cap int64

	mu      sync.Mutex
	streams [2]liveStream // guarded by mu
	start   *Event        // guarded by mu; the start event, delivered first
	notes   []Event       // guarded by mu; waiting events, delivered after the output queued before them
	wake    chan struct{} // buffered 1: a pending wake-up for the dispatcher
	done    chan struct{} // closed when the dispatcher has delivered everything
}

type liveStream struct {
	name    Stream
	pending []byte // accepted, not yet delivered
	queued  int64  // bytes accepted so far
	seq     int64  // last seq delivered
	capped  bool   // the cap was reached: nothing more is accepted
	sentCap bool   // the capped event was delivered
	eof     bool   // the drain finished
}

// newLive returns a dispatcher that delivers to cb, or nil when cb is nil
// (all methods of a nil *live do nothing).
func newLive(cb func(Event), limit int64) *live {
	if cb == nil {
		return nil
	}
	l := &live{cb: cb, cap: limit, wake: make(chan struct{}, 1), done: make(chan struct{})}
	l.streams[stdoutStream].name = Stdout
	l.streams[stderrStream].name = Stderr
	return l
}

func (l *live) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// started queues the start event ahead of any output.
func (l *live) started(pid int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.start = &Event{Event: EventStart, Pid: pid}
	l.mu.Unlock()
	l.poke()
}

// push accepts a copy of p for stream i, as far as the cap allows. It never
// blocks on the callback.
func (l *live) push(i streamIndex, p []byte) {
	if l == nil || len(p) == 0 {
		return
	}
	l.mu.Lock()
	s := &l.streams[i]
	if s.capped {
		// Nothing more of this stream goes live, and the push that capped
		// it woke the dispatcher for the capped event: a flood past the cap
		// costs no wake-up per read.
		l.mu.Unlock()
		return
	}
	room := l.cap - s.queued
	if int64(len(p)) > room {
		p = p[:room]
		s.capped = true
	}
	s.pending = append(s.pending, p...)
	s.queued += int64(len(p))
	if s.capped {
		// The live output ends here: never inside a character.
		s.pending = s.pending[:utf8cut.Complete(s.pending)]
	}
	l.mu.Unlock()
	l.poke()
}

// note queues ev (a waiting event) after the output accepted so far.
func (l *live) note(ev Event) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.notes = append(l.notes, ev)
	l.mu.Unlock()
	l.poke()
}

// eof records that stream i was drained to its end.
func (l *live) eof(i streamIndex) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.streams[i].eof = true
	l.mu.Unlock()
	l.poke()
}

// run delivers events until both streams reached EOF and everything queued
// was delivered. Its owner waits on l.done.
func (l *live) run() {
	defer close(l.done)
	for {
		ev, finished := l.next()
		if finished {
			return
		}
		if ev == nil {
			<-l.wake
			continue
		}
		l.cb(*ev)
	}
}

// next takes the next event to deliver, nil when there is none yet, and
// reports whether everything has been delivered.
func (l *live) next() (*Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start != nil {
		ev := l.start
		l.start = nil
		return ev, false
	}
	for i := range l.streams {
		s := &l.streams[i]
		if n := deliverable(s.pending, s.eof || s.capped); n > 0 {
			data := string(s.pending[:n])
			s.pending = s.pending[n:]
			if len(s.pending) == 0 {
				s.pending = nil
			}
			s.seq++
			return &Event{Event: EventOutput, Stream: s.name, Seq: s.seq, Data: data}, false
		}
		if s.capped && !s.sentCap && (len(s.pending) == 0 || s.eof) {
			s.sentCap = true
			s.pending = nil
			s.seq++
			return &Event{Event: EventCapped, Stream: s.name, Seq: s.seq}, false
		}
	}
	if len(l.notes) > 0 {
		ev := l.notes[0]
		l.notes = l.notes[1:]
		return &ev, false
	}
	all := true
	for i := range l.streams {
		s := &l.streams[i]
		if !s.eof || len(s.pending) > 0 || (s.capped && !s.sentCap) {
			all = false
		}
	}
	return nil, all
}

// deliverable says how many leading bytes of p to put in one event: at most
// maxEventData, and never ending inside a UTF-8 sequence that later bytes may
// complete, unless final (nothing more will come).
func deliverable(p []byte, final bool) int {
	n := min(len(p), maxEventData)
	if n == 0 || final && n == len(p) {
		return n
	}
	return utf8cut.Complete(p[:n])
}
