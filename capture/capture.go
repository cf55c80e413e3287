package capture

import (
	"bytes"
	"sync"

	"github.com/corral-sh/corral/internal/lines"
)

const (
	// DefaultMaxBytes is the byte ceiling used when Limits.MaxBytes is zero or negative.
	DefaultMaxBytes = 512 << 10
	// DefaultMaxLines is the line ceiling used when Limits.MaxLines is zero or negative.
	DefaultMaxLines = 200_000
)

// Limits bounds what a Head retains. A zero or negative field takes its
// default (DefaultMaxBytes, DefaultMaxLines); the zero Limits is the default.
type Limits struct {
	MaxBytes int // bytes retained at most
	MaxLines int // lines retained at most; the last one keeps its newline
}

// Counts describes the whole stream and what a Head retained of it. Its
// fields are those of budget.Counts, in the same order, so a caller converts
// one into the other (budget.Counts(c)); capture does not import budget.
type Counts struct {
	// TotalBytes and TotalLines describe the whole stream written so far; a
	// last line without a newline counts as a line.
	TotalBytes, TotalLines int64
	// CapturedBytes and CapturedLines describe what Bytes returns; a line
	// of which only a prefix was retained counts as captured.
	CapturedBytes, CapturedLines int64
	// OmittedBytes and OmittedLines are Total minus Captured.
	OmittedBytes, OmittedLines int64
	// EdgeLineBytes is the length of the stream's first line (the edge a
	// head keeps), newline excluded, counted over the whole stream even past
	// the ceiling.
	EdgeLineBytes int64
}

// Head is an io.Writer that keeps the head of a stream and counts all of
// it. Create one with New. It is safe for concurrent use by one writer and
// any number of readers (any number of writers is safe too, but their bytes
// interleave in call order).
type Head struct {
	maxBytes int
	maxLines int64

	mu         sync.Mutex
	buf        []byte // retained head; guarded by mu; cap never exceeds maxBytes
	full       bool   // a ceiling was reached: nothing more is retained; guarded by mu
	keptNL     int64  // newlines in buf; guarded by mu
	totalBytes int64  // guarded by mu
	totalNL    int64  // newlines in the whole stream; guarded by mu
	endsNL     bool   // the stream's last byte is '\n'; guarded by mu
	firstLine  int64  // bytes of the first line seen so far; guarded by mu
	firstDone  bool   // the first line's newline was seen; guarded by mu
}

// New returns an empty Head with the given limits. It allocates nothing for
// the retained bytes until they arrive.
func New(l Limits) *Head {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxLines <= 0 {
		l.MaxLines = DefaultMaxLines
	}
	return &Head{maxBytes: l.MaxBytes, maxLines: int64(l.MaxLines)}
}

// Write counts p and retains as much of it as the limits still allow. It
// always returns len(p), nil: past the ceiling it only counts.
func (h *Head) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	nl := lines.Count(p)

	h.mu.Lock()
	defer h.mu.Unlock()
	h.totalBytes += int64(len(p))
	h.totalNL += nl
	h.endsNL = p[len(p)-1] == '\n'
	if !h.firstDone {
		// nl already says whether p ends the first line: a stream
		// without newlines is scanned once per write, not twice.
		if nl == 0 {
			h.firstLine += int64(len(p))
		} else {
			h.firstLine += int64(bytes.IndexByte(p, '\n'))
			h.firstDone = true
		}
	}
	if !h.full {
		h.retainLocked(p, nl)
	}
	return len(p), nil
}

// retainLocked appends the part of p that the limits still allow; nl is the
// number of newlines in p.
func (h *Head) retainLocked(p []byte, nl int64) {
	take := p
	if room := h.maxBytes - len(h.buf); len(take) > room {
		take = take[:room]
		nl = -1 // unknown for the shortened slice
	}
	if nl < 0 {
		nl = lines.Count(take)
	}
	if left := h.maxLines - h.keptNL; nl >= left {
		// The left-th newline in take ends the last line we may keep.
		take = take[:lines.AfterNewline(take, left)]
		nl = left
		h.full = true
	}
	h.grow(len(take))
	h.buf = append(h.buf, take...)
	h.keptNL += nl
	if len(h.buf) == h.maxBytes {
		h.full = true
	}
}

// grow makes room for n more bytes in h.buf without letting its capacity
// exceed maxBytes (append's own growth could overshoot it).
func (h *Head) grow(n int) {
	need := len(h.buf) + n
	if need <= cap(h.buf) {
		return
	}
	c := max(4*cap(h.buf), need, 4096)
	c = min(c, h.maxBytes)
	nb := make([]byte, len(h.buf), c)
	copy(nb, h.buf)
	h.buf = nb
}

// Cap is the capacity of the buffer that holds the retained head, in bytes
// (at most MaxBytes): what the Head takes of memory besides itself.
func (h *Head) Cap() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return cap(h.buf)
}

// Bytes returns a copy of the retained head; nil if nothing was written.
func (h *Head) Bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.buf) == 0 {
		return nil
	}
	return bytes.Clone(h.buf)
}

// Counts returns the stream's counters at this moment.
func (h *Head) Counts() Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := Counts{
		TotalBytes:    h.totalBytes,
		TotalLines:    h.totalNL,
		CapturedBytes: int64(len(h.buf)),
		CapturedLines: h.keptNL,
		EdgeLineBytes: h.firstLine,
	}
	if h.totalBytes > 0 && !h.endsNL {
		c.TotalLines++
	}
	if n := len(h.buf); n > 0 && h.buf[n-1] != '\n' {
		c.CapturedLines++
	}
	c.OmittedBytes = c.TotalBytes - c.CapturedBytes
	c.OmittedLines = c.TotalLines - c.CapturedLines
	return c
}
