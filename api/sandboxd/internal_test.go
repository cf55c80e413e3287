package sandboxd

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral-sh/corral/supervisor"
)

// TestGRPCCodes: every class of supervisor error has its gRPC code, and a
// closed supervisor reads as Unavailable with one sentence.
func TestGRPCCodes(t *testing.T) {
	for c := supervisor.ClassInternal; c <= supervisor.ClassDeadline; c++ {
		if _, ok := grpcCodes[c]; !ok {
			t.Errorf("class %d has no gRPC code", c)
		}
	}
	st, _ := status.FromError(toStatus(fmt.Errorf("start: %w", supervisor.ErrClosed)))
	if st.Code() != codes.Unavailable || st.Message() != "corral is shutting down" {
		t.Errorf("closed: %v %q", st.Code(), st.Message())
	}
}
