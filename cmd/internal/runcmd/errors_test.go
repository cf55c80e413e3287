package runcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/cmd/internal/cli"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/spill"
	"github.com/corral-sh/corral/supervisor"
)

// TestErrorBody: corral run --json prints the error JSON of the wire faces
// (api.NewErrorBody) for every invalid request it can meet.
func TestErrorBody(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&supervisor.RequestError{Reason: "timeout must be between 1 and 300 seconds, got 301"},
		fmt.Errorf("supervisor: %w", &supervisor.RequestError{Reason: "no command given"}),
		fmt.Errorf("label: %w", spill.ErrInvalidName),
		fmt.Errorf("stdout policy: %w", budget.ErrInvalid),
		fmt.Errorf("session: %w", journal.ErrInvalidSession),
	} {
		if !invalidRequest(err) || api.Code(err) != api.CodeInvalidArgument {
			t.Errorf("%v: invalidRequest %v, api.Code %s", err, invalidRequest(err), api.Code(err))
		}
		got, _ := json.Marshal(newErrorBody(err))
		want, _ := json.Marshal(api.NewErrorBody(err))
		if string(got) != string(want) {
			t.Errorf("%v: %s, want %s", err, got, want)
		}
		if got, want := ErrText(err), cli.Plain(api.Message(err)); got != want {
			t.Errorf("%v: text %q, want %q", err, got, want)
		}
	}
	if invalidRequest(errors.New("disk full")) {
		t.Error("an internal error is not an invalid request")
	}
}
