package supervisor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/supervisor/vtemu"
)

// newSup returns a Supervisor for one test, closed at cleanup; with
// corral's terminal emulator unless cfg names one.
func newSup(t testing.TB, cfg Config) *Supervisor {
	t.Helper()
	if cfg.Emulator == nil {
		cfg.Emulator = testEmulator
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testEmulator is corral's terminal emulator (supervisor/vtemu), as
// corral-server gives it.
func testEmulator(cols, rows int) Emulator { return vtemu.New(cols, rows) }

// marked returns req with this test's marker in its environment, and a
// cleanup check that no process carrying the marker survives.
func marked(t testing.TB, req Request) Request {
	t.Helper()
	entry, value := proctest.Marker(t)
	k, v, _ := strings.Cut(entry, "=")
	if req.Env == nil {
		req.Env = map[string]string{}
	}
	req.Env[k] = v
	t.Cleanup(func() { proctest.NoSurvivors(t, value, time.Second) })
	return req
}

// run runs req and fails the test on an error.
func run(t testing.TB, s *Supervisor, req Request) Result {
	t.Helper()
	res, err := s.Run(context.Background(), marked(t, req))
	if err != nil {
		t.Fatalf("Run(%q): %v", req.Command, err)
	}
	return res
}

// recorder collects events and checks the event contract as they come:
// seq contiguous per stream from 1, nothing after capped for that stream,
// nothing at all after the result.
type recorder struct {
	t      testing.TB
	mu     sync.Mutex
	events []Event
	seq    map[Stream]int64
	capped map[Stream]bool
	done   bool
	data   map[Stream]*strings.Builder
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, seq: map[Stream]int64{}, capped: map[Stream]bool{},
		data: map[Stream]*strings.Builder{Stdout: {}, Stderr: {}}}
}

func (r *recorder) on(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		r.t.Errorf("event %+v after the result", ev)
	}
	switch ev.Event {
	case EventStart:
		if len(r.events) != 0 {
			r.t.Errorf("start is event %d, want the first", len(r.events)+1)
		}
	case EventOutput, EventCapped:
		if r.capped[ev.Stream] {
			r.t.Errorf("%s event seq %d after capped", ev.Stream, ev.Seq)
		}
		if want := r.seq[ev.Stream] + 1; ev.Seq != want {
			r.t.Errorf("%s seq %d, want %d", ev.Stream, ev.Seq, want)
		}
		r.seq[ev.Stream] = ev.Seq
		if ev.Event == EventCapped {
			r.capped[ev.Stream] = true
		} else {
			r.data[ev.Stream].WriteString(ev.Data)
		}
	case EventResult:
		r.done = true
	default:
		r.t.Errorf("unknown event %q", ev.Event)
	}
	r.events = append(r.events, ev)
}

func (r *recorder) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.Event == kind {
			n++
		}
	}
	return n
}

// tiers lists the containment tiers that work on this machine, so the
// lifecycle tests run in each.
func tiers(t testing.TB) []killtree.Tier {
	var out []killtree.Tier
	for _, st := range killtree.Doctor(killtree.Config{}) {
		if st.Works {
			out = append(out, st.Tier)
		}
	}
	if len(out) == 0 {
		t.Fatal("no containment tier works here")
	}
	return out
}

func budgetLimits(maxBytes, maxLines int) budget.Limits {
	return budget.Limits{MaxBytes: maxBytes, MaxLines: maxLines}
}
