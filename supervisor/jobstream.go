package supervisor

import (
	"context"
	"syscall"
)

// JobStream follows one job's raw output, for front ends that forward the
// bytes as they come (the envd face) rather than in model-sized windows. It
// reads the job's tail rings by byte cursor, so what a reader that fell
// behind missed is counted, never buffered: each stream keeps at most the
// capture ceiling (Config.Capture, 512 KiB by default). A JobStream holds
// the job even after the table forgot it; it is safe for concurrent use.
type JobStream struct {
	j *job
}

// OpenStream returns a JobStream of the job id; the error matches
// ErrNotFound (and ErrJobExpired) as the other job calls do.
func (h *Jobs) OpenStream(id string) (*JobStream, error) {
	s := h.s
	j, err := s.jobs.get(id)
	if err != nil {
		return nil, err
	}
	return &JobStream{j: j}, nil
}

// TTY reports whether the job runs on a terminal: its one output stream is
// stream 0, and its input is typed into the terminal.
func (js *JobStream) TTY() bool { return js.j.term != nil }

// Pid is the job's shell's process ID.
func (js *JobStream) Pid() int { return js.j.pid }

// Read copies into p what stream i (0 stdout, 1 stderr) holds from byte
// offset off on, without waiting, and returns the bytes copied and the
// offset of p[0]: past off when the ring had moved on, the difference being
// what this reader skipped. n is 0 when there is nothing past off yet.
func (js *JobStream) Read(i int, p []byte, off int64) (n int, start int64) {
	r := js.j.out
	if i == 1 {
		r = js.j.err
	}
	return r.tail.CopySince(p, off)
}

// Changed returns a channel closed at the next output of either stream or
// at the job's end. Take it before reading, so nothing is missed.
func (js *JobStream) Changed() <-chan struct{} { return js.j.waiter() }

// Done is closed once the job ended and its Result is set.
func (js *JobStream) Done() <-chan struct{} { return js.j.done }

// Result is the job's Result once it ended; ok is false while it runs.
// Every byte of output was read into the rings before the Result was set,
// so a reader that saw ok and then read to the end saw the whole stream.
func (js *JobStream) Result() (res Result, ok bool) {
	r, ok := js.j.exited()
	if !ok {
		return Result{}, false
	}
	return *r, true
}

// Kill kills the job's whole tree and waits, as long as ctx allows, for the
// job's end. With hard, every member gets SIGKILL at once; otherwise the way
// down starts with SIGTERM to every member and the grace (Jobs.Kill). Killing
// a job that already ended does nothing.
func (js *JobStream) Kill(ctx context.Context, hard bool) error {
	if hard {
		js.j.cancelCause(ErrClientGone)
	} else {
		js.j.cancel()
	}
	select {
	case <-js.j.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Signal sends sig, then SIGCONT, to every process of the job's tree
// (killtree.Tree.Signal) and returns how many were signalled. It kills
// nothing by itself: what handles or ignores sig goes on, under the job's
// lifetime; Kill is the way to end the tree. A job that already ended
// signals nothing and returns 0.
func (js *JobStream) Signal(sig syscall.Signal) (int, error) {
	js.j.mu.Lock()
	tree := js.j.tree
	js.j.mu.Unlock()
	if tree == nil {
		return 0, nil
	}
	n, err := tree.Signal(sig)
	if _, ended := js.j.exited(); ended {
		return n, nil // the tree closed meanwhile: the job is gone
	}
	return n, err
}

// Has reports whether the job id is running or still retained, without
// the cost of describing it (Get counts its output).
func (h *Jobs) Has(id string) bool {
	s := h.s
	_, err := s.jobs.get(id)
	return err == nil
}

// An Observer is told of the commands a face ran, for its metrics: each
// Result once its command ended, or the error that refused a start. A nil
// Observer is told nothing.
type Observer func(Result, error)

// Refused tells o of a start that err refused.
func (o Observer) Refused(err error) {
	if o != nil {
		o(Result{}, err)
	}
}

// Ended tells o of js's Result once the job ended, from a goroutine that
// ends with the job.
func (o Observer) Ended(js *JobStream) {
	if o == nil {
		return
	}
	go func() {
		<-js.Done()
		res, _ := js.Result()
		o(res, nil)
	}()
}
