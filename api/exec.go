package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	if e.Yield != nil {
		if y := *e.Yield; y != y || y < 0 || y > supervisor.CeilingTimeout.Seconds() {
			return req, fmt.Errorf("%w: yield must be between 0 and the timeout in seconds, got %v", ErrInvalidArgument, y)
		}
		req.Yield = time.Duration(*e.Yield * float64(time.Second))
	}
	return req, nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var body ExecRequest
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	req, err := body.request(s.sup.MaxTimeout())
	if err != nil {
		s.metrics.outcome(OutcomeInvalid)
		writeError(w, err)
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), NDJSONType) {
		res, err := s.run(r.Context(), req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}

	// Streaming: the status line goes out with the first event, so a
	// request refused before anything ran still gets its error status.
	ctx, abort := context.WithCancel(r.Context())
	defer abort()
	st := &stream{w: w, rc: http.NewResponseController(w), abort: abort}
	st.enc = json.NewEncoder(w)
	req.OnEvent = st.event
	_, err = s.run(ctx, req)
	switch {
	case err != nil && !st.started:
		writeError(w, err)
	case err != nil:
		st.write(NewErrorBody(err))
	}
	st.rc.SetWriteDeadline(time.Time{})
}

// stream writes live events as NDJSON, one flushed line each. Its methods
// are called from one goroutine at a time (supervisor.Request.OnEvent).
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	enc     *json.Encoder
	abort   func()
	started bool
	failed  bool
}

func (st *stream) event(ev supervisor.Event) { st.write(ev) }

func (st *stream) write(v any) {
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
// reading.
func (st *stream) fail() {
	st.failed = true
	st.abort()
}

// decode reads one JSON object of at most MaxBodyBytes into v, refusing
// unknown fields and trailing data.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if dec.Decode(&json.RawMessage{}) != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return fmt.Errorf("%w: the body exceeds %d bytes", ErrTooLarge, MaxBodyBytes)
	case errors.Is(err, ErrBodyTimeout):
		return err
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("%w: field %s: expected %s, got %s", ErrInvalidArgument, typeErr.Field, typeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Errorf("%w: expected a JSON object, got %s", ErrInvalidArgument, typeErr.Value)
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: malformed JSON: %v", ErrInvalidArgument, err)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the body is empty; a JSON object is required", ErrInvalidArgument)
	}
	// Unknown fields and trailing data: encoding/json has no typed error.
	return fmt.Errorf("%w: %s", ErrInvalidArgument, strings.TrimPrefix(err.Error(), "json: "))
}

// typeName turns a Go type into the JSON word for it.
func typeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["):
		return "object"
	case strings.Contains(goType, "int"), strings.Contains(goType, "float"):
		return "number"
	case strings.Contains(goType, "string"):
		return "string"
	case strings.Contains(goType, "bool"):
		return "boolean"
	}
	return goType
}
