package api_test

import (
	"fmt"
	"testing"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// TestCodeOfLibraryErrors: errors the library returns map to their wire
// codes through errors.Is, wrapped or not.
func TestCodeOfLibraryErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{supervisor.ErrClosed, api.CodeUnavailable},                                  // Run or Jobs.Start after Close
		{fmt.Errorf("run: %w", supervisor.ErrClosed), api.CodeUnavailable},           // wrapped
		{fmt.Errorf("x: %w", supervisor.ErrInvalidRequest), api.CodeInvalidArgument}, // a bad request
		{supervisor.ErrNotFound, api.CodeNotFound},                                   // no such job
	}
	for _, tc := range tests {
		if got := api.Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
