package api

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/supervisor"
)

// ExecRequest is the body of POST /v1/exec. Unknown fields are refused.
type ExecRequest struct {
	// Command is run with bash -c. Required.
	Command string `json:"command"`
	// Timeout in seconds, 1–300; absent means 60.
	Timeout *float64 `json:"timeout,omitempty"`
	// Cwd is the working directory; absent means the server's.
	Cwd string `json:"cwd,omitempty"`
	// Env overrides variables of the server's environment.
	Env map[string]string `json:"env,omitempty"`
	// Stdin, when present, is written to the command's stdin, which is then
	// closed; absent means /dev/null.
	Stdin *string `json:"stdin,omitempty"`
	// Session and Label name spill files ([A-Za-z0-9._-], 1–128). A named
	// session other than "default" also carries the working directory and
	// exported variables from one command to the next.
	Session string `json:"session,omitempty"`
	Label   string `json:"label,omitempty"`
	// ResetSession clears the session's state before the command runs.
	ResetSession bool `json:"resetSession,omitempty"`
	// Yield in seconds, 0 (absent) for none, at most the timeout: a command
	// still running then is handed over as a background job, and the
	// response is a Result with running: true and its jobId.
	Yield *float64 `json:"yield,omitempty"`
	// StdoutPolicy and StderrPolicy are head, tail or head+tail.
	StdoutPolicy string `json:"stdoutPolicy,omitempty"`
	StderrPolicy string `json:"stderrPolicy,omitempty"`
	// Limits caps the command's resources; an absent field takes the
	// server's default (--memory-max, --cpus, --pids-max), which is also
	// the most a request may ask for.
	Limits *LimitsRequest `json:"limits,omitempty"`
	// TTY runs the command on a terminal of that size (docs/terminals.md);
	// an absent side is 120 columns or 40 rows.
	TTY *supervisor.TTYSize `json:"tty,omitempty"`
}

// LimitsRequest is the limits object of a request. A field that is present
// must be positive; the supervisor checks the bounds (supervisor.Limits).
type LimitsRequest struct {
	MemoryBytes *int64   `json:"memoryBytes,omitempty"`
	CPUs        *float64 `json:"cpus,omitempty"`
	Pids        *int64   `json:"pids,omitempty"`
}

// limits converts the wire limits, refusing explicit zeros and negatives
// (which the library would take as "the default").
func (l *LimitsRequest) limits() (supervisor.Limits, error) {
	var out supervisor.Limits
	if l == nil {
		return out, nil
	}
	if m := l.MemoryBytes; m != nil {
		if *m <= 0 {
			return out, errorf(ErrInvalidArgument, "limits.memoryBytes must be positive, got %d", *m)
		}
		out.MemoryBytes = *m
	}
	if c := l.CPUs; c != nil {
		if !(*c > 0) {
			return out, errorf(ErrInvalidArgument, "limits.cpus must be positive, got %v", *c)
		}
		out.CPUs = *c
	}
	if p := l.Pids; p != nil {
		if *p <= 0 || *p > math.MaxInt32 {
			return out, errorf(ErrInvalidArgument, "limits.pids must be between 1 and the server's limit, got %d", *p)
		}
		out.Pids = int(*p)
	}
	return out, nil
}

// NDJSONType is the media type of the streaming form of POST /v1/exec.
const NDJSONType = "application/x-ndjson"

// streamWriteTimeout bounds one write of an event to a client. A client
// that stops reading for longer is treated as gone: its command is aborted
// rather than left to block the event dispatcher.
const streamWriteTimeout = 30 * time.Second

// request turns the wire form into a supervisor request, validating what
// the supervisor cannot see (the timeout's wire form).
func (e ExecRequest) request(maxTimeout time.Duration) (supervisor.Request, error) {
	req := supervisor.Request{
		Command:      e.Command,
		Dir:          e.Cwd,
		Env:          e.Env,
		Session:      e.Session,
		Label:        e.Label,
		ResetSession: e.ResetSession,
		StdoutPolicy: budget.Policy(e.StdoutPolicy),
		StderrPolicy: budget.Policy(e.StderrPolicy),
		TTY:          e.TTY,
	}
	if e.Timeout != nil {
		d, err := supervisor.ParseTimeout(*e.Timeout, maxTimeout)
		if err != nil {
			return req, err
		}
		req.Timeout = d
	}
	if e.Stdin != nil {
		req.Stdin = []byte(*e.Stdin)
	}
	lim, err := e.Limits.limits()
	if err != nil {
		return req, err
	}
	req.Limits = lim
	if e.Yield != nil {
		// The library checks it against the command's timeout.
		if req.Yield, err = supervisor.ParseSeconds("yield", *e.Yield, 0, supervisor.CeilingTimeout); err != nil {
			return req, err
		}
	}
	return req, nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var body ExecRequest
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	req, err := body.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		s.metrics.outcome(FaceHTTP, OutcomeInvalid)
		writeError(w, err)
		return
	}
	req.Owner = s.httpOwner(r) // a yield hands the command over as its job
	// A client that disconnects gets its command aborted without the
	// grace (supervisor.ErrClientGone).
	ctx, end := whileConnected(r.Context())
	defer end(nil)
	if !strings.Contains(r.Header.Get("Accept"), NDJSONType) {
		res, err := s.run(ctx, FaceHTTP, req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}

	// Streaming: the status line goes out with the first event, so a
	// request refused before anything ran still gets its error status.
	// After Config.Heartbeat of silence a keepalive line goes out.
	st := &stream{w: w, rc: http.NewResponseController(w), every: s.beat, last: time.Now(),
		abort: func() { end(supervisor.ErrClientGone) }}
	st.enc = NewEncoder(w)
	req.OnEvent = st.event
	stop := keepalive(s.beat, st.keepalive)
	_, err = s.run(ctx, FaceHTTP, req)
	stop()
	switch {
	case err != nil && !st.started:
		writeError(w, err)
	case err != nil:
		st.write(NewErrorBody(err))
	}
	st.rc.SetWriteDeadline(time.Time{})
}

// stream writes live events as NDJSON, one flushed line each. Events come
// from one goroutine at a time (supervisor.Request.OnEvent), keepalives
// from another; mu serialises them.
type stream struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	enc   *json.Encoder
	abort func()
	every time.Duration

	mu      sync.Mutex
	last    time.Time // guarded by mu; when the last line went out
	started bool      // guarded by mu
	ended   bool      // guarded by mu; the result (or error) line went out
	failed  bool      // guarded by mu
}

func (st *stream) event(ev supervisor.Event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.writeLocked(ev)
	st.ended = ev.Event == supervisor.EventResult
}

// keepalive writes a keepalive line when the stream was silent for st.every
// (and has begun, and not ended), and returns when the next one is due.
func (st *stream) keepalive() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.started && !st.ended && time.Since(st.last) >= st.every {
		st.writeLocked(supervisor.Event{Event: EventKeepalive})
	}
	return st.last.Add(st.every)
}

func (st *stream) write(v any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.writeLocked(v)
	st.ended = true
}

func (st *stream) writeLocked(v any) {
	st.last = time.Now()
	if st.failed {
		return
	}
	if !st.started {
		st.started = true
		st.w.Header().Set("Content-Type", NDJSONType)
		st.w.Header().Set("X-Content-Type-Options", "nosniff")
		st.w.WriteHeader(http.StatusOK)
	}
	// ErrNotSupported (a writer without deadlines) leaves writes unbounded.
	st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if err := st.enc.Encode(v); err != nil {
		st.fail()
		return
	}
	if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		st.fail()
	}
}

// fail stops writing and aborts the command: the client is gone or stopped
// reading, so its tree gets SIGKILL at once.
func (st *stream) fail() {
	st.failed = true
	st.abort()
}
