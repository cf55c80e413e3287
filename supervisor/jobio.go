package supervisor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/corral-sh/corral/budget"
)

// stdinWriteTimeout bounds one Jobs.Input write into a full pipe that the
// job does not read.
const stdinWriteTimeout = 5 * time.Second

// CursorNext, as Jobs.Output's after, reads from where the previous
// cursorless read of that job's stream ended (from 0 for the first, or from
// what a yielding command's Result showed). Cursorless reads of one stream
// are serialised, so across any number of them every byte is returned once
// (or counted in SkippedBytes when the ring moved past it).
const CursorNext int64 = math.MinInt64

// Output returns what the job wrote to stream ("stdout" or "stderr")
// from byte offset after on (CursorNext: where the last cursorless read
// ended), at most one model budget of it (96 KiB and 4,000 lines, cut after
// a complete line where one fits, valid UTF-8), and the cursor to pass next.
// With wait > 0 (at most MaxOutputWait) it waits for new output or the job's
// end when there is none yet.
func (h *Jobs) Output(ctx context.Context, id string, stream Stream, after int64, wait time.Duration) (JobOutput, error) {
	s := h.s
	j, err := s.jobs.get(id)
	if err != nil {
		return JobOutput{}, err
	}
	r, i, err := j.stream(stream)
	if err != nil {
		return JobOutput{}, err
	}
	if wait < 0 || wait > MaxOutputWait {
		return JobOutput{}, invalid("wait must be between 0 and %g seconds, got %g",
			MaxOutputWait.Seconds(), wait.Seconds())
	}
	if after == CursorNext {
		j.cursorMu.Lock()
		defer j.cursorMu.Unlock()
		out, err := s.readJob(ctx, j, r, stream, j.cursor[i], wait)
		if err == nil {
			j.cursor[i] = out.Next
		}
		return out, err
	}
	if total := r.tail.Counts().TotalBytes; after < 0 || after > total {
		return JobOutput{}, invalid("after must be between 0 and %d (the bytes written so far), got %d",
			total, after)
	}
	return s.readJob(ctx, j, r, stream, after, wait)
}

// readJob is one cursor read of r from after on.
func (s *Supervisor) readJob(ctx context.Context, j *job, r *retained, stream Stream, after int64, wait time.Duration) (JobOutput, error) {
	id := j.id
	limits := s.cfg.Budget
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		woken := j.waiter() // before reading, so no write is missed
		res, ended := j.exited()
		data, start := r.tail.Since(after)
		text, used := budget.Window(data, limits, ended)
		if used > 0 || ended || timer == nil {
			out := JobOutput{ID: id, Stream: stream, Data: text, After: after, Next: start + int64(used),
				SkippedBytes: start - after, State: JobRunning}
			if used == 0 && len(data) == 0 {
				out.Next = max(after, start)
			}
			if ended {
				out.State, out.Result = JobExited, res
			} else {
				out.Waiting, _ = j.currentWait()
			}
			if stream == Stdout {
				out.Screen = j.tuiScreen()
			}
			return out, nil
		}
		select {
		case <-woken:
		case <-timer:
			timer = nil // one last read, then return what there is
		case <-ctx.Done():
			return JobOutput{}, ctx.Err()
		}
	}
}

// Input writes data to an interactive job's stdin, then closes stdin
// when closeStdin is set. Errors wrap ErrJobStdin when the job is not
// interactive, stdin was closed, or the job ended.
func (h *Jobs) Input(id string, data []byte, closeStdin bool) error {
	s := h.s
	j, err := s.jobs.get(id)
	if err != nil {
		return err
	}
	if !j.interactive {
		return stdinError("job %s was not started interactive", id)
	}
	if _, ended := j.exited(); ended {
		return stdinError("job %s has exited", id)
	}
	if closeStdin && j.term != nil {
		return stdinError("job %s runs on a terminal, which has no end of input to close: write \u0004 (Ctrl-D) for an end of file", id)
	}
	j.stdinMu.Lock()
	defer j.stdinMu.Unlock()
	if j.stdinClosed {
		return stdinError("job %s: stdin is closed", id)
	}
	if j.watch != nil && (len(data) > 0 || closeStdin) {
		// A read seen before the input is no wait after it; the wait in
		// progress ends with it.
		j.watch.beforeInput()
		defer j.watch.afterInput()
	}
	// The job's end closes w too (finish), perhaps while this call runs:
	// a write it cut short reports the exit; a close it did first is done.
	w := j.stdinW
	if len(data) > 0 {
		w.SetWriteDeadline(time.Now().Add(stdinWriteTimeout))
		if _, err := w.Write(data); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return stdinError("job %s has exited", id)
			}
			return stdinError("job %s: %s", id, describeStdinErr(err))
		}
	}
	if testHookInputWritten != nil {
		testHookInputWritten(j)
	}
	if closeStdin {
		j.stdinClosed = true
		if err := w.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			return stdinError("job %s: %s", id, describeStdinErr(err))
		}
	}
	return nil
}

// testHookInputWritten, when set by a test, runs in Jobs.Input between the
// write and the close.
var testHookInputWritten func(*job)

func stdinError(format string, args ...any) error {
	return &RequestError{Reason: fmt.Sprintf(format, args...), Kind: ErrJobStdin}
}

func describeStdinErr(err error) string {
	switch {
	case os.IsTimeout(err):
		return "the job is not reading its stdin (write timed out)"
	case errors.Is(err, os.ErrClosed):
		return "stdin is closed"
	case errors.Is(err, syscall.EPIPE):
		return "the job closed its stdin"
	}
	return err.Error()
}

// InputPause is how long a job's output must pause, once some came, for
// Jobs.Exchange to return before its yield.
const InputPause = 100 * time.Millisecond

// Exchange is one turn of an interactive program: it writes data to the
// job's stdin as Jobs.Input does, then waits up to yield (at most
// MaxOutputWait) for what the job prints on stream, returning early once the
// job waits for input again (JobOutput.Waiting, where the waiting watch
// runs: docs/terminals.md), once that output pauses for InputPause (only
// where no watch runs), or once the job ends, and returns it as a cursorless
// read (CursorNext) does.
func (h *Jobs) Exchange(ctx context.Context, id string, stream Stream, data []byte, closeStdin bool, yield time.Duration) (JobOutput, error) {
	s := h.s
	if yield <= 0 || yield > MaxOutputWait {
		return JobOutput{}, invalid("yield must be more than 0 and at most %g seconds, got %g",
			MaxOutputWait.Seconds(), yield.Seconds())
	}
	j, err := s.jobs.get(id)
	if err != nil {
		return JobOutput{}, err
	}
	r, i, err := j.stream(stream)
	if err != nil {
		return JobOutput{}, err
	}
	j.cursorMu.Lock()
	defer j.cursorMu.Unlock()
	start := j.cursor[i]
	if err := h.Input(id, data, closeStdin); err != nil {
		return JobOutput{}, err
	}
	_, waits := j.currentWait() // after the input, which ended any wait
	deadline := time.Now().Add(yield)
	seen, grew := start, time.Time{}
	for {
		woken := j.waiter()
		_, ended := j.exited()
		now := time.Now()
		if total := r.tail.Counts().TotalBytes; total != seen {
			seen, grew = total, now
		}
		wake := deadline
		if j.watch == nil && !grew.IsZero() && grew.Add(InputPause).Before(deadline) {
			wake = grew.Add(InputPause)
		}
		if w, n := j.currentWait(); w != nil && n > waits {
			break // it waits for input again: its answer is complete
		}
		if ended || !now.Before(wake) {
			break
		}
		t := time.NewTimer(wake.Sub(now))
		select {
		case <-woken:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return JobOutput{}, ctx.Err()
		}
		t.Stop()
	}
	out, err := s.readJob(ctx, j, r, stream, start, 0)
	if err == nil {
		j.cursor[i] = out.Next
	}
	return out, err
}

// stream returns the capture of the job's stream by name and its index in
// the cursorless cursors.
func (j *job) stream(name Stream) (*retained, streamIndex, error) {
	switch name {
	case Stdout:
		return j.out, stdoutStream, nil
	case Stderr:
		return j.err, stderrStream, nil
	}
	return nil, 0, invalid("stream must be stdout or stderr, got %q", name)
}
