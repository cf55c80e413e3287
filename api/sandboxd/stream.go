package sandboxd

import (
	"context"
	"fmt"
	"google.golang.org/grpc/mem"
	"time"

	"github.com/corral-sh/corral/supervisor"
)

// chunkBytes is the most one stdout or stderr message carries.
const chunkBytes = 256 << 10

// coalesceWait is how long follow lets output gather after it sent what
// there was: output that follows a pause goes out at once, a stream that
// keeps coming goes out at most this much later, in chunks of up to
// chunkBytes.
const coalesceWait = time.Millisecond

var streamNames = [2]string{"stdout", "stderr"}

// follow sends js's output from the start of what the rings hold, stream i
// (0 stdout, 1 stderr) through send, until the job ended and both streams
// were read to their end; it returns the job's Result, or the error that
// stopped it (ctx ending, a failed send). What the rings dropped before
// this reader got to it is counted and said in the stream where the gap is.
// Each chunk is a buffer of chunks that send owns: grpc-go frees it into
// the pool once it is written (codec.go).
func follow(ctx context.Context, js *supervisor.JobStream, send func(i int, b mem.Buffer) error) (supervisor.Result, error) {
	var off [2]int64
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		changed := js.Changed()
		res, ended := js.Result() // before reading: an ended job's rings are complete
		sent, full := false, false
		for i := range 2 {
			bp := chunks.Get(chunkBytes)
			n, start := js.Read(i, *bp, off[i])
			if skipped := start - off[i]; skipped > 0 {
				note := fmt.Sprintf("\n[corral: %d bytes of %s were skipped here: this client read more slowly than the "+
					"command wrote, and corral keeps only the end of each stream (its capture ceiling, 512 KiB by default).]\n",
					skipped, streamNames[i])
				if err := send(i, mem.SliceBuffer(note)); err != nil {
					chunks.Put(bp)
					return res, err
				}
			}
			off[i] = start + int64(n)
			if n == 0 {
				chunks.Put(bp)
				continue
			}
			full = full || n == chunkBytes
			*bp = (*bp)[:n]
			if err := send(i, mem.NewBuffer(bp, chunks)); err != nil {
				return res, err
			}
			sent = true
		}
		// Behind the command (a whole chunk read): read on at once. Caught
		// up after sending: let the command write for coalesceWait before
		// the next read, so a flood goes out in whole chunks instead of one
		// wake-up, read and message per pipe read.
		if full || (sent && ended) {
			continue
		}
		if sent {
			pause.Reset(coalesceWait)
			select {
			case <-pause.C:
			case <-ctx.Done():
				return res, ctx.Err()
			}
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
