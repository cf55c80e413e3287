package killtree

import (
	"context"
	"time"
)

// pollUntil calls done with a backoff from 200 µs doubling to 20 ms until it
// returns true or ctx ends. It polls kernel state that offers no
// notification here (cgroup v1 files, a job's process count).
func pollUntil(ctx context.Context, done func() bool) error {
	backoff := 200 * time.Microsecond
	for !done() {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 20*time.Millisecond)
	}
	return nil
}
