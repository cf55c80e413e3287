package ringtail

import (
	"github.com/corral-sh/corral/internal/heapsize"

	"github.com/smallnest/ringbuffer"
)

// Compact shrinks the Tail to what it holds, for a stream that has ended: a
// finished command's tail then costs its content, not a whole ring of
// MaxBytes. Bytes, Counts and Since answer as before; a later Write first
// grows the ring back to MaxBytes, so compacting too early costs a copy,
// never bytes.
func (t *Tail) Compact() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ring == nil {
		return
	}
	// Counts would rescan the ring into the scratch buffer after the line
	// bound: computed now, the memo holds until the next Write.
	t.boundLocked()
	t.scratch = nil
	held := t.ring.Length()
	if held == t.ring.Capacity() {
		return
	}
	t.ring = t.copyRingLocked(held)
}

// Footprint is the memory the Tail's buffers take now, in bytes: their
// capacity as the allocator rounds it (to its size class, or to whole
// 8 KiB pages past 32 KiB), not their length.
func (t *Tail) Footprint() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := heapsize.Of(cap(t.scratch))
	if t.ring != nil {
		n += heapsize.Of(t.ring.Capacity())
	}
	return n
}

// regrowLocked gives a compacted Tail its full ring back.
func (t *Tail) regrowLocked() {
	t.ring = t.copyRingLocked(t.maxBytes)
}

// copyRingLocked returns a ring of size bytes (at least what t.ring holds)
// holding t.ring's bytes.
func (t *Tail) copyRingLocked(size int) *ringbuffer.RingBuffer {
	held := t.ring.Length()
	b := make([]byte, held)
	t.ring.PeekAt(0, b)
	r := ringbuffer.New(max(size, 1)).SetOverwrite(true)
	_, _ = r.Write(b) // fits: size >= held
	return r
}
