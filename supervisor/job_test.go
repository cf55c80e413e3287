package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// startJob starts a marked job and fails the test on error.
func startJob(t *testing.T, s *Supervisor, r JobRequest) JobStarted {
	t.Helper()
	r.Request = marked(t, r.Request)
	st, err := s.Jobs().Start(r)
	if err != nil {
		t.Fatalf("Jobs.Start(%q): %v", r.Command, err)
	}
	// Cleanups run last-in first-out: the job dies before the marker check.
	t.Cleanup(func() { s.Jobs().Kill(st.ID) })
	return st
}

// TestJobCursor: a job printing a line per 10 ms is read with a cursor;
// every line arrives exactly once, in order, and the final read carries the
// result.
func TestJobCursor(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	st := startJob(t, s, JobRequest{Request: Request{Command: "for i in $(seq 1 50); do echo line$i; sleep 0.01; done"}})
	var got strings.Builder
	after := int64(0)
	for {
		out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, after, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if out.After != after || out.SkippedBytes != 0 {
			t.Fatalf("after %d skipped %d", out.After, out.SkippedBytes)
		}
		got.WriteString(out.Data)
		after = out.Next
		if out.State == JobExited {
			if out.Result == nil || out.Result.ExitCode == nil || *out.Result.ExitCode != 0 {
				t.Errorf("result %+v", out.Result)
			}
			break
		}
	}
	var want strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if got.String() != want.String() {
		t.Errorf("read %q", got.String())
	}
}

// TestJobLongPollWakes: a waiting reader wakes on new output, not at the
// end of its wait.
func TestJobLongPollWakes(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	st := startJob(t, s, JobRequest{Request: Request{Command: "read x; echo got $x; sleep 30"}, Interactive: true})
	type read struct {
		out JobOutput
		err error
	}
	ch := make(chan read, 1)
	go func() {
		out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, 0, 30*time.Second)
		ch <- read{out, err}
	}()
	if err := s.Jobs().Input(st.ID, []byte("ping\n"), false); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil || r.out.Data != "got ping\n" || r.out.Next != 9 || r.out.State != JobRunning {
			t.Errorf("read %+v %v", r.out, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not wake on output")
	}
	res, err := s.Jobs().Kill(st.ID)
	if err != nil || !res.Aborted {
		t.Errorf("kill: %+v %v", res, err)
	}
}

// TestJobSkipped: a reader that fell behind the ring is told how much it
// missed.
func TestJobSkipped(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Capture: CaptureLimits{MaxBytes: 4096, MaxLines: 1000}})
	st := startJob(t, s, JobRequest{Request: Request{Command: "seq 1 10000"}})
	if _, err := s.Jobs().Wait(context.Background(), st.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(len(seqOutput(10000)))
	if out.SkippedBytes != total-4096 || out.Next != total || !strings.HasSuffix(out.Data, "9999\n10000\n") {
		t.Errorf("skipped %d next %d (total %d) data ends %q", out.SkippedBytes, out.Next, total, out.Data[max(0, len(out.Data)-20):])
	}
}

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// TestJobWindow: one read returns at most one budget, cut after a line, and
// the next read continues exactly there.
func TestJobWindow(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Budget: budgetLimits(1000, 10)})
	st := startJob(t, s, JobRequest{Request: Request{Command: "seq 1 100"}})
	s.Jobs().Wait(context.Background(), st.ID, 10*time.Second)
	var got strings.Builder
	for after := int64(0); ; {
		out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out.Data, "\n"); n > 10 || (out.Data != "" && !strings.HasSuffix(out.Data, "\n")) {
			t.Fatalf("window %q", out.Data)
		}
		got.WriteString(out.Data)
		if out.Next == after {
			break
		}
		after = out.Next
	}
	if got.String() != seqOutput(100) {
		t.Errorf("pages joined to %q", got.String())
	}
}

// TestJobInteractive: stdin is written, read back, closed, and the job ends.
func TestJobInteractive(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	for _, tc := range []struct {
		name, command, input, want string
	}{
		// cat echoes until stdin closes.
		{"cat", "cat", "hello\nworld\n", "hello\nworld\n"},
		// read answers one line.
		{"read", "read name; echo hello $name", "corral\n", "hello corral\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := startJob(t, s, JobRequest{Request: Request{Command: tc.command}, Interactive: true})
			if err := s.Jobs().Input(st.ID, []byte(tc.input), true); err != nil {
				t.Fatal(err)
			}
			res, err := s.Jobs().Wait(context.Background(), st.ID, 10*time.Second)
			if err != nil || res.Stdout != tc.want || res.ExitCode == nil || *res.ExitCode != 0 {
				t.Errorf("result %+v %v", res, err)
			}
			if err := s.Jobs().Input(st.ID, []byte("more"), false); !errors.Is(err, ErrJobStdin) {
				t.Errorf("input after the end: %v", err)
			}
		})
	}
}

// TestJobInputCloseRacesTheEnd: the answer a job reads makes it exit, and
// its end closes stdin before the same Input call closes it: the call
// succeeds (the data was written). A second close of a running job's stdin
// says it is closed.
func TestJobInputCloseRacesTheEnd(t *testing.T) {
	s := newSup(t, Config{})
	st := startJob(t, s, JobRequest{Request: Request{Command: "read x; echo got $x"}, Interactive: true})
	testHookInputWritten = func(j *job) {
		select { // the job's end closes its stdin before Wait returns
		case <-j.done:
		case <-time.After(10 * time.Second):
			t.Error("the job did not end after its answer")
		}
	}
	defer func() { testHookInputWritten = nil }()
	if err := s.Jobs().Input(st.ID, []byte("corral\n"), true); err != nil {
		t.Fatalf("input whose close the job's end overtook: %v", err)
	}
	testHookInputWritten = nil
	if res, err := s.Jobs().Wait(context.Background(), st.ID, 10*time.Second); err != nil || res.Stdout != "got corral\n" {
		t.Fatalf("result %+v %v", res, err)
	}

	st = startJob(t, s, JobRequest{Request: Request{Command: "sleep 30"}, Interactive: true})
	if err := s.Jobs().Input(st.ID, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Jobs().Input(st.ID, nil, true); !errors.Is(err, ErrJobStdin) || !strings.Contains(err.Error(), "stdin is closed") {
		t.Errorf("second close: %v", err)
	}
}

// TestJobLifetime: a job past its lifetime is killed with its whole tree,
// setsid child included.
func TestJobLifetime(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	st := startJob(t, s, JobRequest{Request: Request{Command: "(setsid sleep 60 &); sleep 60"}, Lifetime: time.Second})
	res, err := s.Jobs().Wait(context.Background(), st.ID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Kill.Processes < 2 || !strings.Contains(res.Stderr, "lifetime of 1s") {
		t.Errorf("result %+v", res)
	}
}

// TestJobRetention: an exited job stays readable for the retention, then
// it is forgotten.
func TestJobRetention(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{JobRetention: 200 * time.Millisecond})
	st := startJob(t, s, JobRequest{Request: Request{Command: "echo hi"}})
	if _, err := s.Jobs().Wait(context.Background(), st.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs().List()) != 1 {
		t.Errorf("jobs right after the end: %+v", s.Jobs().List())
	}
	waitFor(t, func() bool { return len(s.Jobs().List()) == 0 })
	checkExpired(t, s, st.ID, "more than 200ms ago (the retention")
}

// TestJobLimit: the 33rd live job is refused; ending one makes room.
func TestJobLimit(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	var ids []string
	for range DefaultMaxJobs {
		ids = append(ids, startJob(t, s, JobRequest{Request: Request{Command: "sleep 60"}}).ID)
	}
	if _, err := s.Jobs().Start(JobRequest{Request: Request{Command: "true"}}); !errors.Is(err, ErrTooManyJobs) {
		t.Fatalf("33rd job: %v", err)
	}
	if _, err := s.Jobs().Kill(ids[0]); err != nil {
		t.Fatal(err)
	}
	// The killed job's slot is free the moment Jobs.Kill returns.
	st := startJob(t, s, JobRequest{Request: Request{Command: "true"}})
	jobs := s.Jobs().List()
	if len(jobs) != DefaultMaxJobs+1 || !sort.SliceIsSorted(jobs, func(a, b int) bool { return jobs[a].StartedAt.Before(jobs[b].StartedAt) }) {
		t.Errorf("%d jobs listed", len(jobs))
	}
	s.Jobs().Wait(context.Background(), st.ID, 10*time.Second)
}

// TestJobCloseKillsAll: closing the supervisor kills every job's tree.
func TestJobCloseKillsAll(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Grace: NoGrace})
	if err != nil {
		t.Fatal(err)
	}
	entry, value := proctest.Marker(t)
	k, v, _ := strings.Cut(entry, "=")
	for range 3 {
		if _, err := s.Jobs().Start(JobRequest{Request: Request{Command: "sleep 60 & (setsid sleep 60 &); sleep 60",
			Env: map[string]string{k: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return len(proctest.Survivors(value)) >= 9 })
	s.Close()
	proctest.NoSurvivors(t, value, time.Second)
}

func TestJobInvalid(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	for _, tc := range []struct {
		name string
		req  JobRequest
	}{
		// The lifetime must lie in 1 s to 24 h.
		{"lifetime-short", JobRequest{Request: Request{Command: "true"}, Lifetime: time.Millisecond}},
		{"lifetime-long", JobRequest{Request: Request{Command: "true"}, Lifetime: 25 * time.Hour}},
		// The request is validated like a command.
		{"empty", JobRequest{Request: Request{Command: ""}}},
		// Interactive stdin comes through Jobs.Input only.
		{"interactive-stdin", JobRequest{Request: Request{Command: "cat", Stdin: []byte("x")}, Interactive: true}},
	} {
		if _, err := s.Jobs().Start(tc.req); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	st := startJob(t, s, JobRequest{Request: Request{Command: "echo hi"}})
	s.Jobs().Wait(context.Background(), st.ID, 10*time.Second)
	for _, tc := range []struct {
		name   string
		stream Stream
		after  int64
		wait   time.Duration
	}{
		{"stream", "stdin", 0, 0},             // unknown stream
		{"negative", Stdout, -1, 0},           // negative cursor
		{"past-end", Stdout, 100, 0},          // beyond what was written
		{"wait", Stdout, 0, 31 * time.Second}, // longer than the long-poll bound
	} {
		if _, err := s.Jobs().Output(context.Background(), st.ID, tc.stream, tc.after, tc.wait); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if err := s.Jobs().Input(st.ID, []byte("x"), false); !errors.Is(err, ErrJobStdin) {
		t.Errorf("input to a non-interactive job: %v", err)
	}
	for _, err := range []error{
		func() error { _, err := s.Jobs().Output(context.Background(), "j-nope", Stdout, 0, 0); return err }(),
		func() error { _, err := s.Jobs().Wait(context.Background(), "j-nope", 0); return err }(),
		func() error { _, err := s.Jobs().Kill("j-nope"); return err }(),
		s.Jobs().Input("j-nope", nil, true),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown job: %v", err)
		}
	}
	if _, err := s.Jobs().Wait(context.Background(), startJob(t, s, JobRequest{Request: Request{Command: "sleep 5"}}).ID, 50*time.Millisecond); !errors.Is(err, ErrStillRunning) {
		t.Errorf("wait deadline: %v", err)
	}
}
