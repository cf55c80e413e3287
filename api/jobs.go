package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/corral-sh/corral/supervisor"
)

// DefaultWaitTimeout is how long POST /v1/jobs/{id}/wait waits without a
// timeout parameter.
const DefaultWaitTimeout = 30 * time.Second

// JobRequest is the body of POST /v1/jobs: the body of /v1/exec plus the
// job's lifetime and whether its stdin stays open. Unknown fields are
// refused.
type JobRequest struct {
	ExecRequest
	// Lifetime in seconds, 1 s to the supervisor's maximum (24 h by
	// default); absent means the timeout when one is given, else 30 min.
	Lifetime *float64 `json:"lifetime,omitempty"`
	// Interactive keeps stdin open for POST /v1/jobs/{id}/stdin; it cannot
	// be combined with stdin.
	Interactive bool `json:"interactive,omitempty"`
}

// JobList is the body of GET /v1/jobs.
type JobList struct {
	Jobs []supervisor.JobInfo `json:"jobs"`
}

// request turns the wire form into a supervisor job request.
func (j JobRequest) request(maxTimeout time.Duration) (supervisor.JobRequest, error) {
	req, err := j.ExecRequest.request(maxTimeout)
	if err != nil {
		return supervisor.JobRequest{}, err
	}
	jr := supervisor.JobRequest{Request: req, Interactive: j.Interactive}
	if j.Lifetime != nil {
		jr.Lifetime, err = lifetime(*j.Lifetime)
		if err != nil {
			return supervisor.JobRequest{}, err
		}
	}
	return jr, nil
}

// lifetime converts wire seconds to a Duration for the library to check
// against its bounds. An explicit value that rounds to zero (which the
// library would take as "default") is refused here; values too large for a
// Duration are clamped, so the library refuses them as above its maximum.
func lifetime(sec float64) (time.Duration, error) {
	ns := sec * float64(time.Second)
	switch {
	case math.IsNaN(sec) || math.IsInf(sec, 0):
		return 0, errorf(ErrInvalidArgument, "lifetime must be a finite number of seconds, got %v", sec)
	case ns >= math.MaxInt64:
		return math.MaxInt64, nil
	case ns <= -math.MaxInt64:
		return -math.MaxInt64, nil
	case time.Duration(ns) == 0:
		return 0, errorf(ErrInvalidArgument, "lifetime must be at least %g seconds, got %v",
			supervisor.MinTimeout.Seconds(), sec)
	}
	return time.Duration(ns), nil
}

// startJob starts a background job unless the server is shutting down,
// and counts it under face once it ended (or at once when it was refused).
func (s *Server) startJob(face string, req supervisor.JobRequest) (supervisor.JobStarted, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return supervisor.JobStarted{}, errorf(ErrUnavailable, "the server is shutting down")
	}
	s.starts.Add(1)
	s.mu.Unlock()
	defer s.starts.Done()
	st, err := s.sup.Jobs().Start(req)
	if err != nil {
		s.metrics.observeResult(face, supervisor.Result{}, err)
		return st, err
	}
	s.metrics.watch(s.sup.Jobs(), face, st.ID)
	return st, nil
}

// killJobs waits for job starts in flight, then kills every job of the
// supervisor at once and waits for their trees to be gone or ctx to end.
// Call it after abort.
func (s *Server) killJobs(ctx context.Context) error {
	s.starts.Wait()
	var wg sync.WaitGroup
	for _, j := range s.sup.Jobs().List() {
		if j.State != supervisor.JobRunning {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.sup.Jobs().Kill(j.ID) // ErrNotFound: it ended and was forgotten meanwhile
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("api: shutdown: killing background jobs: %w", ctx.Err())
	}
}

func (s *Server) createJob(w http.ResponseWriter, r *http.Request) {
	var body JobRequest
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	req, err := body.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		writeError(w, err)
		return
	}
	req.Owner = s.httpOwner(r)
	st, err := s.startJob(FaceHTTP, req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, JobList{Jobs: s.ownedJobs(s.httpOwner(r))})
}

// getJob is GET /v1/jobs/{id}: the job's status, and its Result once it
// exited.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	if err := s.ownJob(s.httpOwner(r), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	st, err := s.sup.Jobs().Status(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// resizeJob is POST /v1/jobs/{id}/resize {"cols", "rows"} -> 204.
func (s *Server) resizeJob(w http.ResponseWriter, r *http.Request) {
	if err := s.ownJob(s.httpOwner(r), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	var body supervisor.TTYSize
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	if err := s.sup.Jobs().Resize(r.PathValue("id"), body); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// jobScreen is GET /v1/jobs/{id}/screen: the job's terminal as it looks.
func (s *Server) jobScreen(w http.ResponseWriter, r *http.Request) {
	if err := s.ownJob(s.httpOwner(r), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	sc, err := s.sup.Jobs().Screen(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sc)
}

func (s *Server) jobOutput(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	stream := supervisor.Stdout
	if q.Has("stream") {
		stream = supervisor.Stream(q.Get("stream"))
	}
	// Without after, the read continues from the previous cursorless one.
	after := supervisor.CursorNext
	if q.Has("after") {
		var err error
		if after, err = queryInt(q.Get("after"), "after"); err == nil && after < 0 {
			err = errorf(ErrInvalidArgument, "after must be a byte offset of 0 or more (omit it to continue from the previous read), got %d", after)
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
	wait, err := querySeconds(q.Get("wait"), "wait", 0, supervisor.MaxOutputWait)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.ownJob(s.httpOwner(r), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	out, err := s.sup.Jobs().Output(r.Context(), r.PathValue("id"), stream, after, wait)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) jobStdin(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var yield time.Duration
	if q.Has("yield") {
		var err error
		if yield, err = querySeconds(q.Get("yield"), "yield", time.Millisecond, supervisor.MaxOutputWait); err != nil {
			writeError(w, err)
			return
		}
	}
	stream := supervisor.Stdout
	if q.Has("stream") {
		stream = supervisor.Stream(q.Get("stream"))
	}
	closeStdin := false
	if v := q.Get("close"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, errorf(ErrInvalidArgument, "close must be true or false, got %q", v))
			return
		}
		closeStdin = b
	}
	if err := s.ownJob(s.httpOwner(r), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = errorf(ErrTooLarge, "the body exceeds %d bytes; write stdin in smaller pieces", MaxBodyBytes)
		} else if !errors.Is(err, ErrBodyTimeout) {
			err = errorf(ErrInvalidArgument, "reading the body: %v", err)
		}
		writeError(w, err)
		return
	}
	if yield > 0 {
		out, err := s.sup.Jobs().Exchange(r.Context(), r.PathValue("id"), stream, data, closeStdin, yield)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	if err := s.sup.Jobs().Input(r.PathValue("id"), data, closeStdin); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) waitJob(w http.ResponseWriter, r *http.Request) {
	timeout := DefaultWaitTimeout
	if v := r.URL.Query().Get("timeout"); v != "" {
		var err error
		if timeout, err = querySeconds(v, "timeout", 0, s.sup.Bounds().MaxTimeout); err != nil {
			writeError(w, err)
			return
		}
	}
	id := r.PathValue("id")
	if err := s.ownJob(s.httpOwner(r), id); err != nil {
		writeError(w, err)
		return
	}
	if timeout == 0 {
		// No waiting: Jobs.Wait's 0 would wait without a deadline.
		if err := s.jobRunning(id); err != nil {
			writeError(w, err)
			return
		}
		timeout = time.Hour // the job has exited: Jobs.Wait returns at once
	}
	res, err := s.sup.Jobs().Wait(r.Context(), id, timeout)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// jobRunning returns ErrNotFound for an unknown or forgotten job,
// ErrStillRunning for a running one, and nil for one that exited.
func (s *Server) jobRunning(id string) error {
	j, err := s.sup.Jobs().Get(id)
	if err != nil {
		return err
	}
	if j.State == supervisor.JobRunning {
		return errorf(supervisor.ErrStillRunning, "job %s still running", id)
	}
	return nil
}

func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request) {
	if err := s.ownJob(s.httpOwner(r), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.sup.Jobs().Kill(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// queryInt parses an optional non-negative integer query parameter (0 when
// absent); the library checks it against the stream.
func queryInt(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errorf(ErrInvalidArgument, "%s must be a whole number of bytes, got %q", name, v)
	}
	return n, nil
}

// querySeconds parses an optional query parameter in seconds (0 when
// absent) that must lie in [lo, hi].
func querySeconds(v, name string, lo, hi time.Duration) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, errorf(ErrInvalidArgument, "%s must be a number of seconds, got %q", name, v)
	}
	return supervisor.ParseSeconds(name, f, lo, hi)
}
