package supervisor

import (
	"context"
	"testing"
)

// TestJoinStderr: with JoinStderr the command's stderr is its stdout pipe:
// one stream in the order written, and an empty stderr view; a job's
// stderr stream reads nothing.
func TestJoinStderr(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	res, err := s.Run(context.Background(), Request{Command: "echo a; echo b >&2; echo c", JoinStderr: true})
	if err != nil || res.Stdout != "a\nb\nc\n" || res.Stderr != "" {
		t.Errorf("run: %v %q %q", err, res.Stdout, res.Stderr)
	}
	st, err := s.Jobs().Start(JobRequest{Request: Request{Command: "echo x >&2", JoinStderr: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Jobs().Wait(context.Background(), st.ID, 0); err != nil {
		t.Fatal(err)
	}
	out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, 0, 0)
	errOut, err2 := s.Jobs().Output(context.Background(), st.ID, Stderr, 0, 0)
	if err != nil || err2 != nil || out.Data != "x\n" || errOut.Data != "" {
		t.Errorf("job: %v %v %q %q", err, err2, out.Data, errOut.Data)
	}
}
