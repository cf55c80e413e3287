package supervisor

import (
	"testing"
	"time"
)

// TestJobEventsOwner: a subscriber gets the exited event of its owner's
// job, with the Result, and not another owner's; all gets both.
func TestJobEventsOwner(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	mine, all := s.Jobs().Subscribe("a", false), s.Jobs().Subscribe("", true)
	defer mine.Close()
	defer all.Close()
	other, err := s.Jobs().Start(JobRequest{Request: Request{Command: "exit 1", Owner: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Jobs().Wait(t.Context(), other.ID, 0); err != nil {
		t.Fatal(err)
	}
	own, err := s.Jobs().Start(JobRequest{Request: Request{Command: "exit 2", Owner: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-mine.C:
		if ev.JobID != own.ID || ev.Event != JobEventExited || ev.Result == nil || *ev.Result.ExitCode != 2 {
			t.Errorf("event %+v, want the exit of %s", ev, own.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event")
	}
	for _, want := range []string{other.ID, own.ID} {
		if ev := <-all.C; ev.JobID != want {
			t.Errorf("all: %s, want %s", ev.JobID, want)
		}
	}
}
