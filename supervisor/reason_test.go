package supervisor

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestReasonAndClassify: each face's message and code come from here; a
// row per kind of error the supervisor returns.
func TestReasonAndClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		reason string
		class  Class
	}{
		// a request error: its reason, without "supervisor: invalid request: "
		{"request", invalid("timeout must be between 1 and 300 seconds, got 301"), "timeout must be between 1 and 300 seconds, got 301", ClassInvalid},
		// stdin and terminal errors are request errors too
		{"stdin", stdinError("job j-1: stdin is closed"), "job j-1: stdin is closed", ClassInvalid},
		// a job error keeps its kind
		{"not found", jobError(ErrNotFound, "no job j-9"), "no job j-9", ClassNotFound},
		{"too many", jobError(ErrTooManyJobs, "64 background jobs are running"), "64 background jobs are running", ClassExhausted},
		{"still running", fmt.Errorf("wait: %w", ErrStillRunning), "wait: supervisor: job still running", ClassStillRunning},
		// closed, however wrapped: one sentence
		{"closed", fmt.Errorf("run: %w", errClosed), "corral is shutting down", ClassUnavailable},
		{"canceled", context.Canceled, "context canceled", ClassCanceled},
		{"client gone", ErrClientGone, "the client is gone", ClassCanceled},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "x: context deadline exceeded", ClassDeadline},
		// anything else: its text, the leading prefix dropped
		{"internal", errors.New("supervisor: stdin pipe: too many open files"), "stdin pipe: too many open files", ClassInternal},
	} {
		if got := Reason(tc.err); got != tc.reason {
			t.Errorf("%s: Reason = %q, want %q", tc.name, got, tc.reason)
		}
		if got := Classify(tc.err); got != tc.class {
			t.Errorf("%s: Classify = %d, want %d", tc.name, got, tc.class)
		}
	}
}
