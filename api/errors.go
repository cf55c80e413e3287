package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/spill"
	"github.com/corral-sh/corral/supervisor"
)

// Error codes of the error contract (docs/wire.md), each with its HTTP status
// (Status).
const (
	CodeInvalidArgument   = "INVALID_ARGUMENT"    // 400; also 405 (a method no route serves) and 415
	CodeNotFound          = "NOT_FOUND"           // 404
	CodeBinaryContent     = "TOOL_BINARY_CONTENT" // 400
	CodeUnauthenticated   = "UNAUTHENTICATED"     // 401
	CodePermissionDenied  = "PERMISSION_DENIED"   // 403
	CodeDeadlineExceeded  = "DEADLINE_EXCEEDED"   // 408
	CodeResourceExhausted = "RESOURCE_EXHAUSTED"  // 413 (body), 429 (with Retry-After)
	CodeUnavailable       = "UNAVAILABLE"         // 503
	CodeInternal          = "INTERNAL"            // 500
)

// Errors of the server itself, each mapped to its wire code by Code.
var (
	// ErrInvalidArgument is wrapped by request-decoding errors (malformed
	// JSON, unknown or duplicate keys, wrong types, invalid UTF-8):
	// INVALID_ARGUMENT.
	ErrInvalidArgument = errors.New("api: invalid argument")
	// ErrTooLarge is wrapped when a request body exceeds MaxBodyBytes:
	// RESOURCE_EXHAUSTED with HTTP status 413.
	ErrTooLarge = errors.New("api: request body too large")
	// ErrUnauthenticated is a missing or wrong bearer token: UNAUTHENTICATED.
	ErrUnauthenticated = errors.New("api: unauthenticated")
	// ErrForbidden is a browser request from another origin or under a
	// rebound host name: PERMISSION_DENIED.
	ErrForbidden = errors.New("api: forbidden")
	// ErrBusy means every command slot is taken: RESOURCE_EXHAUSTED with
	// HTTP status 429 and Retry-After.
	ErrBusy = errors.New("api: resource exhausted")
	// ErrUnavailable means the server is shutting down, or (from
	// LimitListener) has as many connections open as it allows:
	// UNAVAILABLE with HTTP status 503 and Retry-After.
	ErrUnavailable = errors.New("api: unavailable")
	// ErrBodyTimeout is a request body that did not arrive within
	// Config.BodyTimeout: DEADLINE_EXCEEDED (408).
	ErrBodyTimeout = errors.New("api: request body timeout")
	// ErrNotFound is a session, journal entry or batch that does not
	// exist: NOT_FOUND.
	ErrNotFound = errors.New("api: not found")
)

// wireError is an error whose client-facing message is composed where it
// is made, without Go package prefixes: Reason is what the wire carries,
// Error (for logs) prefixes it with kind. Kind decides the code: errors.Is
// matches it, and only it. Cause, when set, is kept for the log line.
type wireError struct {
	kind   error
	reason string
	cause  error
}

func (e *wireError) Error() string {
	s := e.kind.Error() + ": " + e.reason
	if e.cause != nil {
		s += " (" + e.cause.Error() + ")"
	}
	return s
}

// Is reports whether target is the error's kind.
func (e *wireError) Is(target error) bool { return target == e.kind }

// errorf returns a *wireError of kind with a formatted reason.
func errorf(kind error, format string, args ...any) error {
	return &wireError{kind: kind, reason: fmt.Sprintf(format, args...)}
}

// ErrorBody is the error JSON of every interface:
// {"error": {"code": "INVALID_ARGUMENT", "message": "..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inner object of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Code maps an error from the library or the server to its wire code with
// errors.Is; anything unknown is INTERNAL.
func Code(err error) string {
	switch {
	case errors.Is(err, supervisor.ErrInvalidRequest), errors.Is(err, spill.ErrInvalidName),
		errors.Is(err, budget.ErrInvalid), errors.Is(err, ErrInvalidArgument), errors.Is(err, journal.ErrInvalidSession):
		return CodeInvalidArgument
	case errors.Is(err, spill.ErrNotFound), errors.Is(err, supervisor.ErrNotFound), errors.Is(err, ErrNotFound),
		errors.Is(err, journal.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, supervisor.ErrStillRunning), errors.Is(err, ErrBodyTimeout):
		return CodeDeadlineExceeded
	case errors.Is(err, supervisor.ErrTooManyJobs), errors.Is(err, ErrBusy), errors.Is(err, ErrTooLarge):
		return CodeResourceExhausted
	case errors.Is(err, budget.ErrBinary):
		return CodeBinaryContent
	case errors.Is(err, ErrUnauthenticated):
		return CodeUnauthenticated
	case errors.Is(err, ErrForbidden):
		return CodePermissionDenied
	case errors.Is(err, ErrUnavailable), errors.Is(err, supervisor.ErrClosed), errors.Is(err, journal.ErrOffline):
		return CodeUnavailable
	}
	return CodeInternal
}

// NewErrorBody wraps err as the error JSON with its code.
func NewErrorBody(err error) ErrorBody {
	return ErrorBody{Error: ErrorDetail{Code: Code(err), Message: Message(err)}}
}

// Message is the message of err as the wire carries it: the reason of the
// server's own errors, else supervisor.Reason, which every face shares
// (without the Go package prefixes that err.Error() keeps for logs:
// "timeout must be between 1 and 300 seconds, got 301").
func Message(err error) string {
	var we *wireError
	if errors.As(err, &we) {
		return we.reason
	}
	return supervisor.Reason(err)
}

// Status is the HTTP status of err: 400, 401, 403, 404, 408 (a job still
// running at a wait's deadline), 413, 429, 503 or 500. (A 405 comes from
// ServeMux or the MCP handler, made the error JSON by jsonErrors.)
func Status(err error) int {
	switch {
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	switch Code(err) {
	case CodeInvalidArgument, CodeBinaryContent:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodePermissionDenied:
		return http.StatusForbidden
	case CodeDeadlineExceeded:
		return http.StatusRequestTimeout
	case CodeResourceExhausted:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// retryAfter is the Retry-After of a 429 or a 503: a slot, a job or a
// connection usually frees within a second.
const retryAfter = "1"

// writeError writes err as the error JSON with its status; a 429 and a 503
// carry Retry-After.
func writeError(w http.ResponseWriter, err error) {
	status := Status(err)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, NewErrorBody(err))
}

// writeJSON writes v as the whole response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	NewEncoder(w).Encode(v)
}
