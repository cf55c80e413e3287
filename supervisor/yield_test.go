package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

func TestYieldHandsOverARunningCommand(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	entry, marker := proctest.Marker(t)
	k, val, _ := strings.Cut(entry, "=")
	begin := time.Now()
	res, err := s.Run(context.Background(), Request{Yield: time.Second, Env: map[string]string{k: val},
		Command: "for i in $(seq 1 50); do echo $i; sleep 0.1; done; sleep 60 & echo bg"})
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Running || res.JobID == "" || res.ExitCode != nil {
		t.Fatalf("not yielded: %+v", res)
	}
	if took > 2*time.Second {
		t.Errorf("the yield of 1 s returned after %v", took)
	}
	if !strings.HasPrefix(res.Stdout, "1\n2\n") {
		t.Errorf("the first lines are missing: %q", res.Stdout)
	}
	if !strings.Contains(res.Stderr, "goes on as background job "+res.JobID) {
		t.Errorf("no hand-over note: %q", res.Stderr)
	}
	// The next cursorless read starts after what the yield showed.
	seenSoFar := strings.Count(res.Stdout, "\n")
	out, err := s.Jobs().Output(context.Background(), res.JobID, Stdout, CursorNext, 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(out.Data, "1\n") || out.After != res.StdoutInfo.TotalBytes {
		t.Errorf("cursorless read after the yield starts at %d (%q), want %d", out.After, out.Data, res.StdoutInfo.TotalBytes)
	}
	final, err := s.Jobs().Wait(context.Background(), res.JobID, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	want.WriteString("bg\n")
	if final.Stdout != want.String() || final.ExitCode == nil || *final.ExitCode != 0 || final.Running {
		t.Errorf("final result: exit %v running %v stdout %q", final.ExitCode, final.Running, final.Stdout)
	}
	if final.Kill.Lingering != 1 {
		t.Errorf("the background sleep was not killed as lingering: %+v", final.Kill)
	}
	if seenSoFar < 2 {
		t.Errorf("yield showed %d lines", seenSoFar)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}

func TestYieldEndsBeforeTheYield(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	res := run(t, s, Request{Yield: 5 * time.Second, Command: "echo quick; exit 3"})
	if res.Running || res.JobID != "" || res.ExitCode == nil || *res.ExitCode != 3 || res.Stdout != "quick\n" {
		t.Fatalf("a command that ended before its yield: %+v", res)
	}
	if jobs := s.Jobs().List(); len(jobs) != 0 {
		t.Errorf("it shows up as a job: %+v", jobs)
	}
}

func TestYieldedCommandKilledAtItsTimeout(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	res := run(t, s, Request{Yield: 200 * time.Millisecond, Timeout: 2 * time.Second, Command: "echo start; sleep 60"})
	if !res.Running {
		t.Fatalf("not yielded: %+v", res)
	}
	final, err := s.Jobs().Wait(context.Background(), res.JobID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !final.TimedOut || final.Stdout != "start\n" || final.DurationMs > 4000 {
		t.Errorf("final: timedOut %v stdout %q after %d ms", final.TimedOut, final.Stdout, final.DurationMs)
	}
	if !strings.Contains(final.Stderr, "timed out after 2s") {
		t.Errorf("the timeout note reads %q", final.Stderr)
	}
}

func TestYieldAbortBeforeTheYield(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := s.Run(ctx, marked(t, Request{Yield: 10 * time.Second, Command: "sleep 60"}))
	if err != nil || !res.Aborted || res.Running {
		t.Fatalf("abort before the yield: %v %+v", err, res)
	}
}

func TestYieldBadValues(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{MaxJobs: 1})
	for _, tc := range []struct {
		req  Request
		want error
	}{
		// Negative.
		{Request{Command: "true", Yield: -time.Second}, ErrInvalidRequest},
		// Past the timeout.
		{Request{Command: "true", Yield: 61 * time.Second}, ErrInvalidRequest},
		{Request{Command: "true", Yield: 3 * time.Second, Timeout: 2 * time.Second}, ErrInvalidRequest},
	} {
		if _, err := s.Run(context.Background(), tc.req); !errors.Is(err, tc.want) {
			t.Errorf("yield %v timeout %v: %v, want %v", tc.req.Yield, tc.req.Timeout, err, tc.want)
		}
	}
	if _, err := s.Jobs().Start(JobRequest{Request: Request{Command: "true", Yield: time.Second}}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a job with a yield: %v", err)
	}
	// No job slot left: refused, nothing started.
	j, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{Command: "sleep 30"})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Jobs().Kill(j.ID)
	if _, err := s.Run(context.Background(), Request{Command: "echo ran", Yield: time.Second}); !errors.Is(err, ErrTooManyJobs) {
		t.Errorf("yield with every job slot taken: %v", err)
	}
}

func TestCursorlessReadsSeeEveryByteOnce(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	j, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{
		Command: "for i in $(seq 1 3000); do echo line-$i; done"})})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got strings.Builder
	var wg sync.WaitGroup
	var reads int
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 250; n++ {
				out, err := s.Jobs().Output(context.Background(), j.ID, Stdout, CursorNext, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if out.SkippedBytes != 0 {
					t.Errorf("skipped %d", out.SkippedBytes)
				}
				mu.Lock()
				// Serialised reads return consecutive pieces; keep them in cursor order.
				got.WriteString(fmt.Sprintf("%d:%s\x00", out.After, out.Data))
				reads++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if _, err := s.Jobs().Wait(context.Background(), j.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for {
		out, err := s.Jobs().Output(context.Background(), j.ID, Stdout, CursorNext, 0)
		if err != nil {
			t.Fatal(err)
		}
		if out.Data == "" {
			break
		}
		got.WriteString(fmt.Sprintf("%d:%s\x00", out.After, out.Data))
	}
	// Reassemble by offset: pieces must tile the stream without gaps or overlaps.
	pieces := map[int64]string{}
	for _, p := range strings.Split(strings.TrimSuffix(got.String(), "\x00"), "\x00") {
		off, data, _ := strings.Cut(p, ":")
		var o int64
		fmt.Sscan(off, &o)
		if data == "" {
			continue
		}
		if _, dup := pieces[o]; dup {
			t.Fatalf("offset %d returned twice", o)
		}
		pieces[o] = data
	}
	var whole strings.Builder
	for off := int64(0); ; {
		d, ok := pieces[off]
		if !ok {
			break
		}
		whole.WriteString(d)
		off += int64(len(d))
	}
	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&want, "line-%d\n", i)
	}
	if whole.String() != want.String() {
		t.Errorf("cursorless reads reassembled to %d bytes, want %d (%d reads)", whole.Len(), want.Len(), reads)
	}
}

func TestJobExchangeOneCallPerTurn(t *testing.T) {
	t.Parallel()
	if _, err := lookPython(); err != nil {
		t.Skip(err)
	}
	s := newSup(t, Config{})
	j, err := s.Jobs().Start(JobRequest{Interactive: true, Request: marked(t, Request{
		Command: `python3 -c 'while True: print(input()[::-1])'`})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Jobs().Kill(j.ID)
	for _, word := range []string{"hello", "corral", "abc", "racecar", "xyz"} {
		out, err := s.Jobs().Exchange(context.Background(), j.ID, Stdout, []byte(word+"\n"), false, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := reverse(word) + "\n"
		if out.Data != want {
			t.Errorf("sent %q, got %q in the same call, want %q", word, out.Data, want)
		}
	}
	// A job that is not interactive is refused.
	plain, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{Command: "sleep 30"})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Jobs().Kill(plain.ID)
	if _, err := s.Jobs().Exchange(context.Background(), plain.ID, Stdout, []byte("x\n"), false, time.Second); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("exchange with a job that is not interactive: %v", err)
	}
	if _, err := s.Jobs().Exchange(context.Background(), j.ID, Stdout, nil, false, 0); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("yield 0: %v", err)
	}
}

func reverse(s string) string {
	r := []rune(s)
	for i, k := 0, len(r)-1; i < k; i, k = i+1, k-1 {
		r[i], r[k] = r[k], r[i]
	}
	return string(r)
}

func lookPython() (string, error) { return execLookPath("python3") }

var execLookPath = exec.LookPath

func TestYieldEndsTheCallersEvents(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	rec := newRecorder(t)
	res := run(t, s, Request{Yield: 300 * time.Millisecond, OnEvent: rec.on,
		Command: "for i in $(seq 1 20); do echo $i; sleep 0.05; done"})
	if !res.Running {
		t.Fatalf("not yielded: %+v", res)
	}
	if _, err := s.Jobs().Wait(context.Background(), res.JobID, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// The recorder fails the test on any event after the result.
	if n := rec.count(EventResult); n != 1 {
		t.Errorf("%d result events, want 1", n)
	}
	rec.mu.Lock()
	last := rec.events[len(rec.events)-1]
	rec.mu.Unlock()
	if last.Event != EventResult || !last.Result.Running {
		t.Errorf("the last event is %+v, want the running result", last)
	}
}
