package supervisor

import (
	"context"
	"errors"
	"strings"
)

// Reason is the message of err as every wire face carries it (HTTP, MCP,
// envd, sandboxd, the CLI): the Reason of a *RequestError or a *JobError,
// "corral is shutting down" for ErrClosed, and otherwise err's text without
// the leading "supervisor: " that Error keeps for logs. Pure; safe for
// concurrent use.
func Reason(err error) string {
	var re *RequestError
	var je *JobError
	switch {
	case errors.As(err, &re):
		return re.Reason
	case errors.As(err, &je):
		return je.Reason
	case errors.Is(err, ErrClosed):
		return "corral is shutting down"
	}
	return strings.TrimPrefix(err.Error(), "supervisor: ")
}

// A Class is the condition of an error that the wire faces map to their
// own codes (HTTP statuses, Connect and gRPC codes).
type Class int

// The classes of Classify, each with the errors it covers.
const (
	ClassInternal     Class = iota // anything else
	ClassInvalid                   // ErrInvalidRequest (ErrJobStdin, ErrNoTerminal included)
	ClassNotFound                  // ErrNotFound (an expired job included)
	ClassExhausted                 // ErrTooManyJobs
	ClassStillRunning              // ErrStillRunning: a wait's deadline passed
	ClassUnavailable               // ErrClosed
	ClassCanceled                  // context.Canceled, ErrClientGone
	ClassDeadline                  // context.DeadlineExceeded
)

// Classify returns the class of err, by errors.Is.
func Classify(err error) Class {
	switch {
	case errors.Is(err, ErrInvalidRequest):
		return ClassInvalid
	case errors.Is(err, ErrNotFound):
		return ClassNotFound
	case errors.Is(err, ErrTooManyJobs):
		return ClassExhausted
	case errors.Is(err, ErrStillRunning):
		return ClassStillRunning
	case errors.Is(err, ErrClosed):
		return ClassUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, ErrClientGone):
		return ClassCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ClassDeadline
	}
	return ClassInternal
}
