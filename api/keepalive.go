package api

import (
	"context"
	"time"

	"github.com/corral-sh/corral/supervisor"
)

// EventKeepalive is the NDJSON line a live stream carries after
// Config.Heartbeat without any other: {"event":"keepalive"} (no seq).
const EventKeepalive = "keepalive"

// keepalive calls beat whenever it is due, until the returned stop is
// called; stop waits for a beat in progress. beat runs on keepalive's own
// goroutine, so it serialises itself with the caller's writes; it sends a
// keepalive if the last write is at least every old, and returns when the
// next one is due (the last write plus every).
func keepalive(every time.Duration, beat func() time.Time) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				t.Reset(time.Until(beat()))
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// whileConnected returns the context a command runs under for one HTTP
// request, r being the request's context. When r ends before the command
// does (the client disconnected), the command is cancelled with
// supervisor.ErrClientGone: nobody is left to read a graceful ending, so
// its tree gets SIGKILL at once. end(cause) cancels it with cause and
// releases r; call it when the command returned.
func whileConnected(r context.Context) (ctx context.Context, end context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r))
	stop := context.AfterFunc(r, func() { cancel(supervisor.ErrClientGone) })
	return ctx, func(cause error) {
		stop()
		cancel(cause)
	}
}
