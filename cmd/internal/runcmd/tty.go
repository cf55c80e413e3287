package runcmd

import (
	"context"
	"errors"
	"io"

	"github.com/corral-sh/corral/supervisor"
)

// runTTY runs req, which has a terminal, as a job of this process: what
// corral's stdin delivers is typed into the terminal (in raw mode when
// stdin is a terminal, so Ctrl-C is the command's), a resize of corral's
// terminal resizes the command's, and the output streams through
// req.OnEvent. It returns the job's Result; cancelling ctx kills the job.
func (m *Main) runTTY(ctx context.Context, sup *supervisor.Supervisor, req supervisor.Request) (supervisor.Result, error) {
	lifetime := req.Timeout
	if lifetime == 0 {
		lifetime = supervisor.DefaultTimeout
	}
	restore := m.rawInput()
	defer restore()
	st, err := sup.Jobs().Start(supervisor.JobRequest{Request: req, Lifetime: lifetime})
	if err != nil {
		return supervisor.Result{}, err
	}
	stopResize := m.followResize(sup, st.ID)
	defer stopResize()
	// The copy ends when stdin ends or the job does (its input is refused);
	// a read blocked on a terminal nobody types into outlives the job until
	// corral exits, which it does right after.
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Stdin.Read(buf)
			if n > 0 && sup.Jobs().Input(st.ID, buf[:n], false) != nil {
				return
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					sup.Jobs().Input(st.ID, []byte{4}, false) // Ctrl-D: the end of input, as a terminal has it
				}
				return
			}
		}
	}()
	res, err := sup.Jobs().Wait(ctx, st.ID, 0)
	if err != nil && ctx.Err() != nil {
		return sup.Jobs().Kill(st.ID)
	}
	return res, err
}
