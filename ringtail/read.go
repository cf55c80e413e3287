package ringtail

import "github.com/corral-sh/corral/internal/lines"

// Reading: the line bound is applied here, on the ring's current content,
// so that Write stays a copy plus a vectorised newline count.

// Bytes returns a copy of the last MaxBytes bytes of the stream, further cut
// to its last MaxLines lines; nil if nothing was written.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	skip, _ := t.boundLocked()
	n := t.heldLocked() - skip
	if n == 0 {
		return nil
	}
	out := make([]byte, n)
	t.ring.PeekAt(skip, out)
	return out
}

// Counts returns the stream's counters at this moment. Past the ceiling the
// first call after a Write scans the ring once (a vectorised count over at
// most MaxBytes bytes); later calls reuse the result until the next Write.
func (t *Tail) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	skip, kept := t.boundLocked()
	c := Counts{
		TotalBytes:    t.totalBytes,
		TotalLines:    t.totalNL,
		CapturedBytes: int64(t.heldLocked() - skip),
		CapturedLines: kept,
		EdgeLineBytes: t.lastDone,
	}
	if t.open > 0 {
		c.TotalLines++
		c.EdgeLineBytes = t.open
	}
	c.OmittedBytes = c.TotalBytes - c.CapturedBytes
	c.OmittedLines = c.TotalLines - c.CapturedLines
	return c
}

// Since returns a copy of the stream from absolute byte offset off (0 is
// the start of the stream) to its current end, as far as the ring still
// holds it, and start, the absolute offset of data[0]. When start > off the
// ring had moved on and start-off bytes were skipped. The result is bounded
// by MaxBytes but not by MaxLines. An off at or beyond TotalBytes returns
// nil and TotalBytes; a negative off is taken as 0.
func (t *Tail) Since(off int64) (data []byte, start int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if off >= t.totalBytes {
		return nil, t.totalBytes
	}
	held := t.heldLocked()
	ringStart := t.totalBytes - int64(held)
	start = max(off, ringStart)
	data = make([]byte, t.totalBytes-start)
	t.ring.PeekAt(int(start-ringStart), data)
	return data, start
}

// heldLocked returns the number of bytes in the ring.
func (t *Tail) heldLocked() int {
	if t.ring == nil {
		return 0
	}
	return t.ring.Length()
}

// boundLocked returns how many leading ring bytes the line bound drops and
// how many lines are left after it, memoised until the next Write.
func (t *Tail) boundLocked() (skip int, kept int64) {
	held := t.heldLocked()
	totalLines := t.totalNL
	if t.open > 0 {
		totalLines++
	}
	if int64(held) == t.totalBytes && totalLines <= t.maxLines {
		return 0, totalLines // nothing dropped yet and under the line bound
	}
	if t.memoAt == t.totalBytes {
		return t.memoSkip, t.memoLines
	}

	// Count the ring's lines: its newlines, plus an open last line. A
	// partial first line (the ring cut it) counts as a line.
	if t.scratch == nil {
		t.scratch = make([]byte, min(32<<10, t.maxBytes))
	}
	var nl int64
	for off := 0; off < held; {
		b := t.chunkLocked(off)
		nl += lines.Count(b)
		off += len(b)
	}
	kept = nl
	if t.open > 0 {
		kept++
	}

	// Drop whole lines from the front until MaxLines are left: skip ends
	// just past the k-th newline.
	if k := kept - t.maxLines; k > 0 {
		for off := 0; off < held; {
			b := t.chunkLocked(off)
			if c := lines.Count(b); c < k {
				k -= c
				off += len(b)
				continue
			}
			skip = off + lines.AfterNewline(b, k)
			break
		}
		kept = t.maxLines
	}
	t.memoAt, t.memoSkip, t.memoLines = t.totalBytes, skip, kept
	return skip, kept
}

// chunkLocked copies the ring's bytes from offset off (relative to its
// oldest byte) into the scratch buffer, as many as fit, and returns them.
func (t *Tail) chunkLocked(off int) []byte {
	n, _ := t.ring.PeekAt(off, t.scratch)
	return t.scratch[:n]
}
