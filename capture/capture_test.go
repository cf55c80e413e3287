package capture

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reference computes what a Head with limits l must hold after the whole
// stream data was written, the naive way: byte by byte.
func reference(data []byte, l Limits) ([]byte, Counts) {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxLines <= 0 {
		l.MaxLines = DefaultMaxLines
	}
	var kept []byte
	lines := 0
	for _, b := range data {
		if len(kept) == l.MaxBytes || lines == l.MaxLines {
			break
		}
		kept = append(kept, b)
		if b == '\n' {
			lines++
		}
	}
	count := func(s []byte) int64 {
		n := int64(0)
		for i, b := range s {
			if b == '\n' || i == len(s)-1 {
				n++
			}
		}
		return n
	}
	first := int64(0)
	for _, b := range data {
		if b == '\n' {
			break
		}
		first++
	}
	c := Counts{
		TotalBytes: int64(len(data)), TotalLines: count(data),
		CapturedBytes: int64(len(kept)), CapturedLines: count(kept),
		EdgeLineBytes: first,
	}
	c.OmittedBytes = c.TotalBytes - c.CapturedBytes
	c.OmittedLines = c.TotalLines - c.CapturedLines
	return kept, c
}

func TestHead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		limits    Limits
		chunks    []string
		want      string
		wantCount Counts
	}{
		// Nothing written: nothing kept, all counters zero.
		{"empty", Limits{}, nil, "", Counts{}},
		// An empty Write changes nothing.
		{"empty write", Limits{}, []string{""}, "", Counts{}},
		// Under both limits everything is kept; the unterminated last line counts.
		{"small", Limits{}, []string{"hello\nwor", "ld"}, "hello\nworld",
			Counts{TotalBytes: 11, TotalLines: 2, CapturedBytes: 11, CapturedLines: 2, EdgeLineBytes: 5}},
		// The byte ceiling cuts inside a line; the partial line is captured.
		{"byte ceiling mid-line", Limits{MaxBytes: 8}, []string{"abc\ndefgh\nij\n"}, "abc\ndefg",
			Counts{TotalBytes: 13, TotalLines: 3, CapturedBytes: 8, CapturedLines: 2, OmittedBytes: 5, OmittedLines: 1, EdgeLineBytes: 3}},
		// The byte ceiling falls exactly after a newline.
		{"byte ceiling at newline", Limits{MaxBytes: 4}, []string{"abc\n", "def\n"}, "abc\n",
			Counts{TotalBytes: 8, TotalLines: 2, CapturedBytes: 4, CapturedLines: 1, OmittedBytes: 4, OmittedLines: 1, EdgeLineBytes: 3}},
		// The line ceiling keeps the MaxLines-th newline and nothing after it.
		{"line ceiling", Limits{MaxLines: 2}, []string{"a\nb\nc\nd"}, "a\nb\n",
			Counts{TotalBytes: 7, TotalLines: 4, CapturedBytes: 4, CapturedLines: 2, OmittedBytes: 3, OmittedLines: 2, EdgeLineBytes: 1}},
		// The line ceiling reached across chunks, one newline per chunk.
		{"line ceiling across chunks", Limits{MaxLines: 2}, []string{"a\n", "b", "\n", "c\n"}, "a\nb\n",
			Counts{TotalBytes: 6, TotalLines: 3, CapturedBytes: 4, CapturedLines: 2, OmittedBytes: 2, OmittedLines: 1, EdgeLineBytes: 1}},
		// The MaxLines-th line without a newline yet keeps growing.
		{"last allowed line open", Limits{MaxLines: 1}, []string{"ab", "cd"}, "abcd",
			Counts{TotalBytes: 4, TotalLines: 1, CapturedBytes: 4, CapturedLines: 1, EdgeLineBytes: 4}},
		// The first line is counted past the byte ceiling.
		{"first line past ceiling", Limits{MaxBytes: 3}, []string{"abcdef", "gh\nx"}, "abc",
			Counts{TotalBytes: 10, TotalLines: 2, CapturedBytes: 3, CapturedLines: 1, OmittedBytes: 7, OmittedLines: 1, EdgeLineBytes: 8}},
		// A stream of newlines only: each is an empty line.
		{"only newlines", Limits{MaxLines: 2}, []string{"\n\n\n"}, "\n\n",
			Counts{TotalBytes: 3, TotalLines: 3, CapturedBytes: 2, CapturedLines: 2, OmittedBytes: 1, OmittedLines: 1}},
		// Negative limits take the defaults.
		{"negative limits", Limits{MaxBytes: -1, MaxLines: -5}, []string{"x\n"}, "x\n",
			Counts{TotalBytes: 2, TotalLines: 1, CapturedBytes: 2, CapturedLines: 1, EdgeLineBytes: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := New(tt.limits)
			for _, c := range tt.chunks {
				if n, err := h.Write([]byte(c)); n != len(c) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", c, n, err, len(c))
				}
			}
			if got := string(h.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(tt.wantCount, h.Counts()); diff != "" {
				t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
			}
			all := []byte{}
			for _, c := range tt.chunks {
				all = append(all, c...)
			}
			_, ref := reference(all, tt.limits)
			if diff := cmp.Diff(ref, h.Counts()); diff != "" {
				t.Errorf("Counts() disagrees with reference (-ref +got):\n%s", diff)
			}
		})
	}
}

// TestHeadUTF8SplitAcrossWrites writes a 4-byte character split at every
// possible point between two Writes and expects it back byte-exact, both
// well inside the ceiling and with the ceiling landing inside the character.
func TestHeadUTF8SplitAcrossWrites(t *testing.T) {
	t.Parallel()
	stream := []byte("ab\U0001F600cd\n") // 😀 is F0 9F 98 80
	for split := 0; split <= len(stream); split++ {
		for _, max := range []int{0, 3, 4, 5, 6} {
			h := New(Limits{MaxBytes: max})
			h.Write(stream[:split])
			h.Write(stream[split:])
			want, _ := reference(stream, Limits{MaxBytes: max})
			if got := h.Bytes(); !bytes.Equal(got, want) {
				t.Errorf("split %d, MaxBytes %d: Bytes() = % x, want % x", split, max, got, want)
			}
		}
	}
}

// TestHeadMemoryBounded proves the retained buffer's capacity never exceeds
// MaxBytes, whatever the chunking, and that nothing is allocated before the
// first byte.
func TestHeadMemoryBounded(t *testing.T) {
	t.Parallel()
	for _, max := range []int{1, 100, 4095, 4097, 10_000, DefaultMaxBytes} {
		h := New(Limits{MaxBytes: max})
		if cap(h.buf) != 0 {
			t.Fatalf("MaxBytes %d: New allocated %d bytes", max, cap(h.buf))
		}
		chunk := bytes.Repeat([]byte("x"), 777)
		for range 2*max/len(chunk) + 2 {
			h.Write(chunk)
			if cap(h.buf) > max {
				t.Fatalf("MaxBytes %d: buffer capacity %d", max, cap(h.buf))
			}
		}
		if len(h.buf) != max {
			t.Errorf("MaxBytes %d: retained %d bytes", max, len(h.buf))
		}
	}
}

// TestHeadLargeStream writes 1 GiB of 80-byte lines in 64 KiB chunks from
// one reused buffer and checks the ceiling and every counter exactly.
func TestHeadLargeStream(t *testing.T) {
	t.Parallel()
	total := int64(1 << 30)
	if testing.Short() || raceEnabled {
		total = 64 << 20
	}
	chunk := textChunk(64 << 10)
	nlPerChunk := int64(bytes.Count(chunk, []byte{'\n'}))
	h := New(Limits{})
	for written := int64(0); written < total; written += int64(len(chunk)) {
		h.Write(chunk)
		if cap(h.buf) > DefaultMaxBytes {
			t.Fatalf("buffer capacity %d exceeds %d", cap(h.buf), DefaultMaxBytes)
		}
	}
	chunks := total / int64(len(chunk))
	got := h.Counts()
	kept := h.Bytes()
	want := Counts{
		TotalBytes: total, TotalLines: chunks * nlPerChunk,
		CapturedBytes: DefaultMaxBytes, CapturedLines: int64(bytes.Count(kept, []byte{'\n'})),
		EdgeLineBytes: int64(bytes.IndexByte(chunk, '\n')),
	}
	if kept[len(kept)-1] != '\n' {
		want.CapturedLines++
	}
	if chunk[len(chunk)-1] != '\n' {
		want.TotalLines++ // the stream ends inside a line
	}
	want.OmittedBytes = want.TotalBytes - want.CapturedBytes
	want.OmittedLines = want.TotalLines - want.CapturedLines
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
	}
	if !bytes.Equal(kept, bytes.Repeat(chunk, DefaultMaxBytes/len(chunk))) {
		t.Error("retained head differs from the stream's first 512 KiB")
	}
}

// textChunk returns n bytes of 80-byte lines (79 characters and a newline),
// with n a multiple of 80 rounded up, cut to n.
func textChunk(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%06d %-72s\n", i, "the quick brown fox jumps over the lazy dog, again and again")
	}
	return b.Bytes()[:n]
}

// TestHeadConcurrent runs one writer against readers calling Bytes and
// Counts; under -race this proves the locking, and the readers check that
// what they see is always a prefix of the stream with consistent counters.
func TestHeadConcurrent(t *testing.T) {
	t.Parallel()
	const lines = 20_000
	var stream bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&stream, "line %d\n", i)
	}
	all := stream.Bytes()
	h := New(Limits{MaxBytes: 64 << 10, MaxLines: 5000})
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				c := h.Counts()
				b := h.Bytes()
				switch {
				case c.TotalBytes < last:
					errs <- fmt.Errorf("TotalBytes went back from %d to %d", last, c.TotalBytes)
					return
				case c.CapturedBytes+c.OmittedBytes != c.TotalBytes || c.CapturedLines+c.OmittedLines != c.TotalLines:
					errs <- fmt.Errorf("inconsistent counts %+v", c)
					return
				case !bytes.HasPrefix(all, b):
					errs <- fmt.Errorf("Bytes() (%d bytes) is not a prefix of the stream", len(b))
					return
				}
				last = c.TotalBytes
			}
		}()
	}
	for p := all; len(p) > 0; {
		n := min(len(p), 1+len(p)%97)
		h.Write(p[:n])
		p = p[n:]
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	want, wantC := reference(all, Limits{MaxBytes: 64 << 10, MaxLines: 5000})
	if !bytes.Equal(h.Bytes(), want) {
		t.Error("final Bytes() differs from the reference")
	}
	if diff := cmp.Diff(wantC, h.Counts()); diff != "" {
		t.Errorf("final Counts() mismatch (-want +got):\n%s", diff)
	}
}

// FuzzHead feeds random data in random chunks under small random limits and
// compares Bytes and Counts with the byte-by-byte reference.
func FuzzHead(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte{3, 1, 7}, uint16(5), uint16(1))
	f.Add([]byte("a\nb\nc\nd\ne"), []byte{1}, uint16(0), uint16(3))
	f.Add([]byte("\n\n\n\n"), []byte{2, 0}, uint16(2), uint16(0))
	f.Add([]byte("ab\U0001F600cd\nef"), []byte{3, 2}, uint16(4), uint16(9))
	f.Add(bytes.Repeat([]byte("xyz\n"), 300), []byte{200, 13}, uint16(500), uint16(70))
	f.Fuzz(func(t *testing.T, data, cuts []byte, maxBytes, maxLines uint16) {
		l := Limits{MaxBytes: int(maxBytes), MaxLines: int(maxLines)}
		h := New(l)
		writeChunked(h, data, cuts)
		want, wantC := reference(data, l)
		if got := h.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("Bytes() = %q, want %q", got, want)
		}
		if diff := cmp.Diff(wantC, h.Counts()); diff != "" {
			t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
		}
		if cap(h.buf) > max(int(maxBytes), 1) && maxBytes > 0 {
			t.Errorf("buffer capacity %d exceeds MaxBytes %d", cap(h.buf), maxBytes)
		}
	})
}

// writeChunked writes data to h in chunks whose sizes cycle through cuts; a
// zero size writes an empty chunk and then a single byte.
func writeChunked(h *Head, data, cuts []byte) {
	if len(cuts) == 0 {
		cuts = []byte{255}
	}
	for i := 0; len(data) > 0; i++ {
		n := min(int(cuts[i%len(cuts)]), len(data))
		if n == 0 {
			h.Write(data[:0])
			n = 1
		}
		h.Write(data[:n])
		data = data[n:]
	}
}

// BenchmarkWrite64K writes 64 KiB chunks of 80-byte lines into a Head past
// its ceiling (counting only) and into Heads still filling (retaining), next
// to a plain copy of the same chunk into a buffer of the ceiling's size.
func BenchmarkWrite64K(b *testing.B) {
	chunk := textChunk(64 << 10)
	b.Run("baseline-copy", func(b *testing.B) {
		buf := make([]byte, DefaultMaxBytes)
		b.SetBytes(int64(len(chunk)))
		off := 0
		for b.Loop() {
			copy(buf[off:], chunk)
			off = (off + len(chunk)) % len(buf)
		}
	})
	b.Run("baseline-alloc-copy", func(b *testing.B) {
		// The floor for "filling": a fresh buffer of the ceiling's size
		// every 8 chunks, then plain copies into it.
		var buf []byte
		b.SetBytes(int64(len(chunk)))
		i := 0
		for b.Loop() {
			off := i % (DefaultMaxBytes / len(chunk)) * len(chunk)
			if off == 0 {
				buf = make([]byte, DefaultMaxBytes)
			}
			copy(buf[off:], chunk)
			i++
		}
		sink = buf
	})
	b.Run("past-ceiling", func(b *testing.B) {
		h := New(Limits{})
		for range DefaultMaxBytes/len(chunk) + 1 {
			h.Write(chunk)
		}
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			h.Write(chunk)
		}
	})
	b.Run("filling", func(b *testing.B) {
		// A fresh Head every 8 chunks (512 KiB): every Write retains, and
		// the lazy growth of the buffer is part of the cost.
		h := New(Limits{})
		b.SetBytes(int64(len(chunk)))
		i := 0
		for b.Loop() {
			if i%(DefaultMaxBytes/len(chunk)) == 0 {
				h = New(Limits{})
			}
			h.Write(chunk)
			i++
		}
	})
}

// sink keeps benchmark buffers alive so the compiler cannot drop the copies.
var sink []byte
