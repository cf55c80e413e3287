package sandboxd

import (
	"context"
	"fmt"
	"sync"

	"github.com/corral-sh/corral/supervisor"
)

// chunkBytes is the most one stdout or stderr message carries.
const chunkBytes = 256 << 10

var chunkBufs = sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}

var streamNames = [2]string{"stdout", "stderr"}

// follow sends js's output from the start of what the rings hold, stream i
// (0 stdout, 1 stderr) through send, until the job ended and both streams
// were read to their end; it returns the job's Result, or the error that
// stopped it (ctx ending, a failed send). What the rings dropped before
// this reader got to it is counted and said in the stream where the gap is.
func follow(ctx context.Context, js *supervisor.JobStream, send func(i int, b []byte) error) (supervisor.Result, error) {
	bp := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(bp)
	buf := *bp
	var off [2]int64
	for {
		changed := js.Changed()
		res, ended := js.Result() // before reading: an ended job's rings are complete
		sent := false
		for i := range 2 {
			n, start := js.Read(i, buf, off[i])
			if skipped := start - off[i]; skipped > 0 {
				note := fmt.Sprintf("\n[corral: %d bytes of %s were skipped here: this client read more slowly than the "+
					"command wrote, and corral keeps only the end of each stream (its capture ceiling, 512 KiB by default).]\n",
					skipped, streamNames[i])
				if err := send(i, []byte(note)); err != nil {
					return res, err
				}
			}
			off[i] = start + int64(n)
			if n > 0 {
				if err := send(i, buf[:n]); err != nil {
					return res, err
				}
				sent = true
			}
		}
		if sent {
			continue
		}
		if ended {
			return res, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}
