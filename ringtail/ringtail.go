package ringtail

import (
	"bytes"
	"sync"

	"github.com/corral-sh/corral/internal/lines"

	"github.com/smallnest/ringbuffer"
)

const (
	// DefaultMaxBytes is the ring size used when Limits.MaxBytes is zero or negative.
	DefaultMaxBytes = 512 << 10
	// DefaultMaxLines is the line bound used when Limits.MaxLines is zero or negative.
	DefaultMaxLines = 200_000
)

// Limits bounds what a Tail retains. A zero or negative field takes its
// default (DefaultMaxBytes, DefaultMaxLines); the zero Limits is the default.
type Limits struct {
	MaxBytes int // size of the ring: bytes retained at most
	MaxLines int // lines handed out at most
}

// Counts describes the whole stream and what a Tail hands out of it. Its
// fields are those of budget.Counts, in the same order, so a caller converts
// one into the other (budget.Counts(c)); ringtail does not import budget.
type Counts struct {
	// TotalBytes and TotalLines describe the whole stream written so far; a
	// last line without a newline counts as a line.
	TotalBytes, TotalLines int64
	// CapturedBytes and CapturedLines describe what Bytes would return now,
	// after the line bound; a line of which only a suffix is retained counts
	// as captured.
	CapturedBytes, CapturedLines int64
	// OmittedBytes and OmittedLines are Total minus Captured.
	OmittedBytes, OmittedLines int64
	// EdgeLineBytes is the length of the stream's last line (the edge a
	// tail keeps), newline excluded (when the stream ends with a newline, of
	// the line that newline ended), counted over the whole stream even when
	// the line is longer than the ring.
	EdgeLineBytes int64
}

// Tail is an io.Writer that keeps the tail of a stream and counts all of
// it. Create one with New. It is safe for concurrent use by one writer and
// any number of readers (several writers are safe too, their bytes
// interleaving in call order).
type Tail struct {
	maxBytes int
	maxLines int64

	mu         sync.Mutex
	ring       *ringbuffer.RingBuffer // nil until the first byte; guarded by mu
	totalBytes int64                  // guarded by mu
	totalNL    int64                  // newlines in the whole stream; guarded by mu
	open       int64                  // bytes after the last newline; guarded by mu
	lastDone   int64                  // length of the last newline-terminated line; guarded by mu
	scratch    []byte                 // reused by readers to scan the ring; guarded by mu

	// The line bound computed for the ring as it was at memoAt bytes; a
	// Write moves TotalBytes and so invalidates it. Guarded by mu.
	memoAt    int64
	memoSkip  int   // leading ring bytes the line bound drops
	memoLines int64 // lines left after the bound
}

// New returns an empty Tail with the given limits. The ring is allocated on
// the first non-empty Write.
func New(l Limits) *Tail {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxLines <= 0 {
		l.MaxLines = DefaultMaxLines
	}
	return &Tail{maxBytes: l.MaxBytes, maxLines: int64(l.MaxLines), memoAt: -1}
}

// Write counts p and puts it in the ring, overwriting the oldest bytes. It
// always returns len(p), nil.
func (t *Tail) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	// Line bookkeeping on p alone, before taking the lock: how many
	// newlines, where the last one is, and how long the line it ends is
	// when that line starts inside p (-1: it started before p).
	nl := lines.Count(p)
	last, done := -1, int64(-1)
	if nl > 0 {
		last = lastNewline(p)
		if nl > 1 {
			done = int64(last - lastNewline(p[:last]) - 1)
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.ring == nil:
		t.ring = ringbuffer.New(t.maxBytes).SetOverwrite(true)
	case t.ring.Capacity() < t.maxBytes:
		t.regrowLocked() // written to after Compact
	}
	// Only the last maxBytes bytes can survive, and the ring refuses (and
	// would keep the front of) a write longer than itself.
	tail := p[max(0, len(p)-t.maxBytes):]
	// In non-blocking overwrite mode a write no longer than the ring always
	// succeeds in full; there is no error to handle.
	_, _ = t.ring.Write(tail)

	t.totalBytes += int64(len(p))
	t.totalNL += nl
	switch {
	case nl == 0:
		t.open += int64(len(p))
	case done < 0:
		t.lastDone = t.open + int64(last)
		t.open = int64(len(p) - last - 1)
	default:
		t.lastDone = done
		t.open = int64(len(p) - last - 1)
	}
	return len(p), nil
}

// lastNewline returns the index of the last '\n' in p, or -1. The standard
// library's LastIndexByte is a byte-at-a-time loop, so this looks for the
// block holding the newline with the vectorised IndexByte first and scans
// only that block backwards.
func lastNewline(p []byte) int {
	const block = 256
	for end := len(p); end > 0; end -= block {
		start := max(0, end-block)
		if bytes.IndexByte(p[start:end], '\n') >= 0 {
			return start + bytes.LastIndexByte(p[start:end], '\n')
		}
	}
	return -1
}
