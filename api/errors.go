package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/spill"
	"github.com/corral-sh/corral/supervisor"
)

// Error codes of DESIGN.md's error contract.
const (
	CodeInvalidArgument   = "INVALID_ARGUMENT"
	CodeNotFound          = "NOT_FOUND"
	CodeBinaryContent     = "TOOL_BINARY_CONTENT"
	CodeUnauthenticated   = "UNAUTHENTICATED"
	CodeResourceExhausted = "RESOURCE_EXHAUSTED"
	CodeUnavailable       = "UNAVAILABLE"
	CodeInternal          = "INTERNAL"
)

// Errors of the server itself, each mapped to its wire code by Code.
var (
	// ErrInvalidArgument is wrapped by request-decoding errors (malformed
	// JSON, unknown fields, wrong types): INVALID_ARGUMENT.
	ErrInvalidArgument = errors.New("api: invalid argument")
	// ErrTooLarge is wrapped when a request body exceeds MaxBodyBytes:
	// INVALID_ARGUMENT with HTTP status 413.
	ErrTooLarge = errors.New("api: request body too large")
	// ErrUnauthenticated is a missing or wrong bearer token: UNAUTHENTICATED.
	ErrUnauthenticated = errors.New("api: unauthenticated")
	// ErrForbidden is a browser request from another origin or under a
	// rebound host name: UNAUTHENTICATED with HTTP status 403.
	ErrForbidden = errors.New("api: forbidden")
	// ErrBusy means every command slot is taken: RESOURCE_EXHAUSTED.
	ErrBusy = errors.New("api: resource exhausted")
	// ErrUnavailable means the server is shutting down, or (from
	// LimitListener) has as many connections open as it allows:
	// UNAVAILABLE with HTTP status 503 and Retry-After.
	ErrUnavailable = errors.New("api: unavailable")
	// ErrBodyTimeout is a request body that did not arrive within
	// Config.BodyTimeout: INVALID_ARGUMENT with HTTP status 408.
	ErrBodyTimeout = errors.New("api: request body timeout")
)

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
		errors.Is(err, budget.ErrInvalid), errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrTooLarge),
		errors.Is(err, ErrBodyTimeout):
		return CodeInvalidArgument
	case errors.Is(err, spill.ErrNotFound), errors.Is(err, supervisor.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, supervisor.ErrTooManyJobs), errors.Is(err, supervisor.ErrStillRunning):
		// A wait that ran out of time: the job is busy; wait again later.
		return CodeResourceExhausted
	case errors.Is(err, budget.ErrBinary):
		return CodeBinaryContent
	case errors.Is(err, ErrUnauthenticated), errors.Is(err, ErrForbidden):
		return CodeUnauthenticated
	case errors.Is(err, ErrBusy):
		return CodeResourceExhausted
	case errors.Is(err, ErrUnavailable):
		return CodeUnavailable
	}
	return CodeInternal
}

// NewErrorBody wraps err as the error JSON with its code. A request the
// supervisor refused carries its reason alone ("timeout must be between 1
// and 300 seconds, got 301"), without the Go package prefixes.
func NewErrorBody(err error) ErrorBody {
	msg := err.Error()
	var re *supervisor.RequestError
	if errors.As(err, &re) {
		msg = re.Reason
	}
	return ErrorBody{Error: ErrorDetail{Code: Code(err), Message: msg}}
}

// Status is the HTTP status of err: 400, 401, 403, 404, 408 (a job still
// running at a wait's deadline, a body too slow), 413, 422 (binary
// content), 429, 500 or 503.
func Status(err error) int {
	switch {
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, supervisor.ErrStillRunning), errors.Is(err, ErrBodyTimeout):
		return http.StatusRequestTimeout
	}
	switch Code(err) {
	case CodeInvalidArgument:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeBinaryContent:
		return http.StatusUnprocessableEntity
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodeResourceExhausted:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// retryAfter is the Retry-After of a 503, in seconds.
const retryAfter = "1"

// writeError writes err as the error JSON with its status; a 503 says
// when to retry.
func writeError(w http.ResponseWriter, err error) {
	status := Status(err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, NewErrorBody(err))
}

// writeJSON writes v as the whole response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
