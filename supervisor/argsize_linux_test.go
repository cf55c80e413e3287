package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestArgSize: a command or environment the kernel refuses to exec for its
// size (E2BIG) is an invalid request naming the limit, not a start
// failure, and nothing runs, for a command and for a job. (Linux: one
// variable over MAX_ARG_STRLEN is refused there only.)
func TestArgSize(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	started := filepath.Join(t.TempDir(), "started")
	touch := "touch " + started + "; : "
	tests := []struct {
		name string
		req  Request
	}{
		{"3 MB command", Request{Command: touch + strings.Repeat("x", 3<<20)}},                                                   // over ARG_MAX
		{"200 KiB env value", Request{Command: "touch " + started, Env: map[string]string{"BIG": strings.Repeat("x", 200<<10)}}}, // one variable
	}
	for _, tt := range tests {
		_, err := s.Run(context.Background(), tt.req)
		_, jerr := s.Jobs().Start(JobRequest{Request: tt.req})
		for _, err := range []error{err, jerr} {
			var re *RequestError
			if !errors.Is(err, ErrInvalidRequest) || !errors.Is(err, syscall.E2BIG) || !errors.As(err, &re) ||
				!strings.Contains(re.Reason, "exceed the kernel's argument size limit") {
				t.Errorf("%s: %v, want an invalid request wrapping E2BIG", tt.name, err)
			}
		}
	}
	if _, err := os.Stat(started); err == nil {
		t.Errorf("a refused command ran")
	}
}
