package supervisor

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/capture"
	"github.com/corral-sh/corral/internal/heapsize"
	"github.com/corral-sh/corral/ringtail"
	"github.com/corral-sh/corral/spill"
)

// readChunk is the size of one read from a pipe.
const readChunk = 64 << 10

// readBufs recycles the drains' read buffers. Without it every command
// allocates two 64 KiB buffers (or, kept on the stack, grows both drain
// goroutines' stacks past 64 KiB): for `true`, more than the rest of a run's
// allocations together.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// retained keeps what the capture layer holds of one stream: the head
// (capture.Head) for the head policy, the tail (ringtail.Tail) for the tail
// policy, both for head+tail, each then under half the ceiling so that the
// two together respect it. Writes never fail and never block.
type retained struct {
	policy  budget.Policy
	head    *capture.Head
	tail    *ringtail.Tail
	tailMax int64         // head+tail: the most of the tail a snapshot uses
	total   *atomic.Int64 // the supervisor's drained-bytes counter
	notify  func()        // nil, or called after every write (background jobs)
	grew    func()        // nil, or called after a write that made the buffers grow (background jobs: the byte cap)
	seen    int64         // with grew: held after the last write; only the drain goroutine touches it
	// lastWrite is when the stream was last written (UnixNano), kept when
	// notify is set: a waiting job's prompt comes from the stream written last.
	lastWrite atomic.Int64
}

// newRetained returns the capture for one stream. A non-nil notify (a
// background job's) also keeps a tail ring whatever the policy, under the
// whole ceiling, so readers can follow the stream with a byte cursor. A
// non-nil grew is called after each write that made held grow.
func newRetained(p budget.Policy, c CaptureLimits, total *atomic.Int64, notify, grew func()) *retained {
	r := &retained{policy: p, total: total, notify: notify, grew: grew}
	c = c.norm()
	headLim, tailLim := c, c
	if p == budget.PolicyHeadTail {
		headLim = CaptureLimits{MaxBytes: c.MaxBytes - c.MaxBytes/2, MaxLines: c.MaxLines - c.MaxLines/2}
		tailLim = CaptureLimits{MaxBytes: c.MaxBytes / 2, MaxLines: c.MaxLines / 2}
		r.tailMax = int64(tailLim.MaxBytes)
		if notify != nil {
			tailLim = c
		}
	}
	if p != budget.PolicyTail {
		r.head = capture.New(capture.Limits{MaxBytes: headLim.MaxBytes, MaxLines: headLim.MaxLines})
	}
	if p != budget.PolicyHead || notify != nil {
		r.tail = ringtail.New(ringtail.Limits{MaxBytes: tailLim.MaxBytes, MaxLines: tailLim.MaxLines})
	}
	return r
}

// norm applies the capture layer's defaults to zero or negative fields.
func (c CaptureLimits) norm() CaptureLimits {
	if c.MaxBytes <= 0 {
		c.MaxBytes = capture.DefaultMaxBytes
	}
	if c.MaxLines <= 0 {
		c.MaxLines = capture.DefaultMaxLines
	}
	return c
}

func (r *retained) Write(p []byte) (int, error) {
	if r.head != nil {
		r.head.Write(p)
	}
	if r.tail != nil {
		r.tail.Write(p)
	}
	if r.grew != nil {
		if n := r.held(); n > r.seen {
			r.seen = n
			r.grew()
		}
	}
	r.total.Add(int64(len(p)))
	if r.notify != nil {
		r.lastWrite.Store(time.Now().UnixNano())
		r.notify()
	}
	return len(p), nil
}

// held is the memory the stream's buffers take now, as allocated. Call it
// only before release, or from the goroutine that released.
func (r *retained) held() int64 {
	if r == nil {
		return 0
	}
	var n int64
	if r.head != nil {
		n += heapsize.Of(r.head.Cap())
	}
	if r.tail != nil {
		n += r.tail.Footprint()
	}
	return n
}

// release drops what an exited job no longer needs, the head capture (it
// served the Result), and shrinks the tail ring to its content; it returns
// the bytes the stream still holds. Call it only after the drain ended and
// the Result was made.
func (r *retained) release() int64 {
	r.head = nil
	if r.tail == nil {
		return 0
	}
	r.tail.Compact()
	return r.tail.Footprint()
}

// snapshot returns the retained bytes, the counters budget needs, and what
// a spill file of them holds of the stream. For head+tail the bytes are the
// head followed by what the tail holds past the head, so the first and the
// last lines both survive, and the spill holds both parts with the gap
// between them recorded.
func (r *retained) snapshot() ([]byte, budget.Counts, spill.Stream) {
	switch {
	case r.policy == budget.PolicyHead:
		c := r.head.Counts()
		data := r.head.Bytes()
		return data, budget.Counts(c), spill.Stream{Head: data, TotalBytes: c.TotalBytes}
	case r.policy == budget.PolicyTail:
		c := r.tail.Counts()
		data := r.tail.Bytes()
		return data, budget.Counts(c), spill.Stream{Tail: data, TotalBytes: c.TotalBytes}
	default:
		hc := r.head.Counts()
		head := r.head.Bytes()
		rest, start := r.tail.Since(hc.CapturedBytes)
		if cut := int64(len(rest)) - r.tailMax; cut > 0 {
			// A job's ring holds the whole ceiling for cursor reads; the
			// snapshot takes only the tail's share of it.
			rest, start = rest[cut:], start+cut
		}
		data := append(head, rest...)
		captured := min(int64(len(data)), hc.TotalBytes)
		restLines := int64(bytes.Count(rest, []byte{'\n'}))
		if len(rest) > 0 && rest[len(rest)-1] != '\n' {
			restLines++
		}
		st := spill.Stream{Head: data, TotalBytes: hc.TotalBytes}
		if start > hc.CapturedBytes {
			st = spill.Stream{Head: data[:len(head)], Tail: data[len(head):], TotalBytes: hc.TotalBytes}
		}
		return data, budget.Counts{
			TotalBytes: hc.TotalBytes, TotalLines: hc.TotalLines,
			CapturedBytes: captured, CapturedLines: hc.CapturedLines,
			OmittedBytes: hc.TotalBytes - captured, OmittedLines: max(0, hc.TotalLines-hc.CapturedLines-restLines),
			EdgeLineBytes: hc.EdgeLineBytes,
		}, st
	}
}

// take hands one chunk read from stream i to its capture and to the live
// events. It never blocks.
func (p *proc) take(i streamIndex, b []byte) {
	r := p.out
	if i == stderrStream {
		r = p.err
	}
	r.Write(b)
	p.live.push(i, b)
}

// drain copies stream i from f until EOF (or until stopDrains ends it), then
// reports EOF to the live side and its end on p.drained. It never stops
// early: past the ceiling the capture only counts. f is in the runtime's
// poller, so the wait holds no thread.
func (p *proc) drain(i streamIndex, f *os.File) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	var err error
	for {
		if testHookBeforeRead != nil {
			testHookBeforeRead(p, i)
		}
		n, rerr := f.Read(buf)
		if n > 0 {
			p.take(i, buf[:n])
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && !(p.term != nil && ptyEOF(rerr)) {
				err = rerr
			}
			break
		}
	}
	p.live.eof(i)
	p.drained <- err
}

// testHookBeforeRead, when set by a test, runs before the drain reads
// stream i of p (in the poll loop and in the drain goroutines).
var testHookBeforeRead func(p *proc, i streamIndex)

// stopDrains ends the drain goroutines still reading: their next read fails
// with os.ErrDeadlineExceeded.
func (p *proc) stopDrains() {
	for _, f := range p.outs.f {
		if f != nil {
			f.SetReadDeadline(time.Now())
		}
	}
}
