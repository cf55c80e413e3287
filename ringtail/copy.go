package ringtail

// CopySince copies into p the stream from absolute byte offset off on, as
// far as the ring still holds it and p has room, and returns the bytes
// copied and start, the absolute offset of p[0]. When start > off the ring
// had moved on and start-off bytes were skipped. An off at or beyond
// TotalBytes copies nothing and returns TotalBytes; a negative off is taken
// as 0. Unlike Since it allocates nothing, so a reader that follows a stream
// chunk by chunk costs one buffer.
func (t *Tail) CopySince(p []byte, off int64) (n int, start int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if off >= t.totalBytes {
		return 0, t.totalBytes
	}
	held := t.heldLocked()
	ringStart := t.totalBytes - int64(held)
	start = max(off, ringStart)
	n = int(min(int64(len(p)), t.totalBytes-start))
	if n > 0 {
		t.ring.PeekAt(int(start-ringStart), p[:n])
	}
	return n, start
}
