package ringtail

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reference computes what a Tail with limits l must hand out after the
// whole stream data was written, the naive way: byte by byte.
func reference(data []byte, l Limits) ([]byte, Counts) {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxLines <= 0 {
		l.MaxLines = DefaultMaxLines
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
	kept := data[max(0, len(data)-l.MaxBytes):]
	for count(kept) > int64(l.MaxLines) {
		for i, b := range kept {
			if b == '\n' {
				kept = kept[i+1:]
				break
			}
		}
	}
	last := data
	if len(last) > 0 && last[len(last)-1] == '\n' {
		last = last[:len(last)-1]
	}
	for i := len(last) - 1; i >= 0; i-- {
		if last[i] == '\n' {
			last = last[i+1:]
			break
		}
	}
	c := Counts{
		TotalBytes: int64(len(data)), TotalLines: count(data),
		CapturedBytes: int64(len(kept)), CapturedLines: count(kept),
		EdgeLineBytes: int64(len(last)),
	}
	c.OmittedBytes = c.TotalBytes - c.CapturedBytes
	c.OmittedLines = c.TotalLines - c.CapturedLines
	if len(kept) == 0 {
		kept = nil
	}
	return bytes.Clone(kept), c
}

func TestTail(t *testing.T) {
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
		// The ring cuts inside a line; the partial line is captured.
		{"byte ceiling mid-line", Limits{MaxBytes: 6}, []string{"abc\ndefgh\nij\n"}, "gh\nij\n",
			Counts{TotalBytes: 13, TotalLines: 3, CapturedBytes: 6, CapturedLines: 2, OmittedBytes: 7, OmittedLines: 1, EdgeLineBytes: 2}},
		// The line bound keeps the last MaxLines lines, the open one included.
		{"line bound open last line", Limits{MaxLines: 2}, []string{"a\nb\nc\nd"}, "c\nd",
			Counts{TotalBytes: 7, TotalLines: 4, CapturedBytes: 3, CapturedLines: 2, OmittedBytes: 4, OmittedLines: 2, EdgeLineBytes: 1}},
		// The line bound with a terminated last line.
		{"line bound", Limits{MaxLines: 2}, []string{"a\n", "bb\n", "c", "cc\n"}, "bb\nccc\n",
			Counts{TotalBytes: 9, TotalLines: 3, CapturedBytes: 7, CapturedLines: 2, OmittedBytes: 2, OmittedLines: 1, EdgeLineBytes: 3}},
		// A write longer than the ring keeps its last bytes.
		{"write longer than ring", Limits{MaxBytes: 4}, []string{"0123456789"}, "6789",
			Counts{TotalBytes: 10, TotalLines: 1, CapturedBytes: 4, CapturedLines: 1, OmittedBytes: 6, EdgeLineBytes: 10}},
		// The last line is counted in full though longer than the ring.
		{"last line longer than ring", Limits{MaxBytes: 3}, []string{"x\nabc", "defg", "h\n"}, "gh\n",
			Counts{TotalBytes: 11, TotalLines: 2, CapturedBytes: 3, CapturedLines: 1, OmittedBytes: 8, OmittedLines: 1, EdgeLineBytes: 8}},
		// The last terminated line's length when it started in an earlier write.
		{"last line across writes", Limits{}, []string{"ab", "cd\n"}, "abcd\n",
			Counts{TotalBytes: 5, TotalLines: 1, CapturedBytes: 5, CapturedLines: 1, EdgeLineBytes: 4}},
		// Only newlines: each is an empty line.
		{"only newlines", Limits{MaxLines: 2}, []string{"\n\n\n"}, "\n\n",
			Counts{TotalBytes: 3, TotalLines: 3, CapturedBytes: 2, CapturedLines: 2, OmittedBytes: 1, OmittedLines: 1}},
		// Negative limits take the defaults.
		{"negative limits", Limits{MaxBytes: -1, MaxLines: -5}, []string{"x\n"}, "x\n",
			Counts{TotalBytes: 2, TotalLines: 1, CapturedBytes: 2, CapturedLines: 1, EdgeLineBytes: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tl := New(tt.limits)
			var all []byte
			for _, c := range tt.chunks {
				if n, err := tl.Write([]byte(c)); n != len(c) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", c, n, err, len(c))
				}
				all = append(all, c...)
			}
			if got := string(tl.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(tt.wantCount, tl.Counts()); diff != "" {
				t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
			}
			if _, ref := reference(all, tt.limits); !cmp.Equal(ref, tl.Counts()) {
				t.Errorf("Counts() disagrees with reference:\n%s", cmp.Diff(ref, tl.Counts()))
			}
		})
	}
}

// TestTailExactLineBound writes 300,000 one-byte lines, one Write each and
// all in one Write, and expects exactly the last 200,000 back.
func TestTailExactLineBound(t *testing.T) {
	t.Parallel()
	stream := bytes.Repeat([]byte("a\n"), 300_000)
	want := stream[len(stream)-400_000:]
	for _, whole := range []bool{false, true} {
		tl := New(Limits{})
		if whole {
			tl.Write(stream)
		} else {
			for i := 0; i < len(stream); i += 2 {
				tl.Write(stream[i : i+2])
			}
		}
		if got := tl.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("whole=%v: Bytes() holds %d lines, want 200000", whole, bytes.Count(got, []byte{'\n'}))
		}
		wantC := Counts{TotalBytes: 600_000, TotalLines: 300_000, CapturedBytes: 400_000, CapturedLines: 200_000,
			OmittedBytes: 200_000, OmittedLines: 100_000, EdgeLineBytes: 1}
		if diff := cmp.Diff(wantC, tl.Counts()); diff != "" {
			t.Errorf("whole=%v: Counts() mismatch (-want +got):\n%s", whole, diff)
		}
	}
}

// TestTailUTF8SplitAcrossWrites writes a 4-byte character split at every
// possible point between two Writes and expects it back byte-exact, both
// well inside the ring and with the ring's edge inside the character.
func TestTailUTF8SplitAcrossWrites(t *testing.T) {
	t.Parallel()
	stream := []byte("ab\U0001F600cd\n") // 😀 is F0 9F 98 80
	for split := 0; split <= len(stream); split++ {
		for _, max := range []int{0, 4, 5, 6, 7} {
			tl := New(Limits{MaxBytes: max})
			tl.Write(stream[:split])
			tl.Write(stream[split:])
			want, _ := reference(stream, Limits{MaxBytes: max})
			if got := tl.Bytes(); !bytes.Equal(got, want) {
				t.Errorf("split %d, MaxBytes %d: Bytes() = % x, want % x", split, max, got, want)
			}
		}
	}
}

func TestSince(t *testing.T) {
	t.Parallel()
	tl := New(Limits{MaxBytes: 8, MaxLines: 1})
	if data, start := tl.Since(0); data != nil || start != 0 {
		t.Errorf("empty: Since(0) = %q, %d; want nil, 0", data, start)
	}
	tl.Write([]byte("0123\n5"))
	tl.Write([]byte("6789\nbcd"))
	// The stream is "0123\n56789\nbcd" (14 bytes); the ring holds "789\nbcd" plus "6".
	tests := []struct {
		off       int64
		want      string
		wantStart int64
	}{
		{0, "6789\nbcd", 6},  // the ring moved on: 6 bytes skipped
		{-3, "6789\nbcd", 6}, // a negative offset is the start of the stream
		{6, "6789\nbcd", 6},  // the oldest byte held; not line-bounded
		{11, "bcd", 11},      // inside the ring
		{13, "d", 13},        // the last byte
		{14, "", 14},         // caught up
		{99, "", 14},         // beyond the end
	}
	for _, tt := range tests {
		data, start := tl.Since(tt.off)
		if string(data) != tt.want || start != tt.wantStart {
			t.Errorf("Since(%d) = %q, %d; want %q, %d", tt.off, data, start, tt.want, tt.wantStart)
		}
		if tt.want == "" && data != nil {
			t.Errorf("Since(%d) = non-nil empty slice, want nil", tt.off)
		}
	}
}

// TestTailLargeStream writes 1 GiB of 80-byte lines in 64 KiB chunks from
// one reused buffer and checks the ring's size and every counter exactly.
func TestTailLargeStream(t *testing.T) {
	t.Parallel()
	total := int64(1 << 30)
	if testing.Short() || raceEnabled {
		total = 64 << 20
	}
	chunk := textChunk(64 << 10)
	tl := New(Limits{})
	for written := int64(0); written < total; written += int64(len(chunk)) {
		tl.Write(chunk)
	}
	if c := tl.ring.Capacity(); c != DefaultMaxBytes {
		t.Errorf("ring capacity %d, want %d", c, DefaultMaxBytes)
	}
	chunks := total / int64(len(chunk))
	kept := tl.Bytes()
	if !bytes.Equal(kept, bytes.Repeat(chunk, DefaultMaxBytes/len(chunk))) {
		t.Errorf("retained tail (%d bytes) differs from the stream's last 512 KiB", len(kept))
	}
	nl := int64(bytes.Count(chunk, []byte{'\n'}))
	want := Counts{
		TotalBytes: total, TotalLines: chunks * nl,
		CapturedBytes: DefaultMaxBytes, CapturedLines: int64(DefaultMaxBytes/len(chunk)) * nl,
		EdgeLineBytes: int64(len(chunk) - 1 - bytes.LastIndexByte(chunk, '\n')),
	}
	if chunk[len(chunk)-1] != '\n' {
		want.TotalLines++ // the stream ends inside a line
		want.CapturedLines++
	}
	want.OmittedBytes = want.TotalBytes - want.CapturedBytes
	want.OmittedLines = want.TotalLines - want.CapturedLines
	if diff := cmp.Diff(want, tl.Counts()); diff != "" {
		t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
	}
}

// textChunk returns n bytes of 80-byte lines (79 characters and a newline),
// cut to n.
func textChunk(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%06d %-72s\n", i, "the quick brown fox jumps over the lazy dog, again and again")
	}
	return b.Bytes()[:n]
}

// TestTailConcurrent runs one writer against readers calling Bytes, Counts
// and Since. Under -race it proves the locking; the readers check what they
// see against the stream: Since's bytes equal the stream at the offset it
// reports, Bytes is a run of whole consecutive lines after at most a
// partial one, and the counters are consistent.
func TestTailConcurrent(t *testing.T) {
	t.Parallel()
	const lines = 20_000
	var stream bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&stream, "%07d\n", i) // 8-byte lines
	}
	all := stream.Bytes()
	l := Limits{MaxBytes: 8<<10 + 3, MaxLines: 700}
	tl := New(l)
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var next int64
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if err := checkSnapshot(tl, all, l, &next, r); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for p := all; len(p) > 0; {
		n := min(len(p), 1+len(p)%301)
		tl.Write(p[:n])
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
	want, wantC := reference(all, l)
	if !bytes.Equal(tl.Bytes(), want) {
		t.Error("final Bytes() differs from the reference")
	}
	if diff := cmp.Diff(wantC, tl.Counts()); diff != "" {
		t.Errorf("final Counts() mismatch (-want +got):\n%s", diff)
	}
}

// checkSnapshot reads tl once the way reader r does and checks it against
// the stream all; next is the reader's Since position.
func checkSnapshot(tl *Tail, all []byte, l Limits, next *int64, r int) error {
	c := tl.Counts()
	if c.CapturedBytes+c.OmittedBytes != c.TotalBytes || c.CapturedLines+c.OmittedLines != c.TotalLines ||
		c.CapturedBytes > int64(l.MaxBytes) || c.CapturedLines > int64(l.MaxLines) {
		return fmt.Errorf("reader %d: inconsistent counts %+v", r, c)
	}
	b := tl.Bytes()
	if len(b) > l.MaxBytes || int64(bytes.Count(b, []byte{'\n'})) > int64(l.MaxLines) {
		return fmt.Errorf("reader %d: Bytes() holds %d bytes, %d lines", r, len(b), bytes.Count(b, []byte{'\n'}))
	}
	if len(b) > 0 && !bytes.Contains(all, b) {
		return fmt.Errorf("reader %d: Bytes() is not a piece of the stream", r)
	}
	data, start := tl.Since(*next)
	if start < *next || !bytes.Equal(data, all[start:start+int64(len(data))]) {
		return fmt.Errorf("reader %d: Since(%d) = %d bytes at %d, not the stream's", r, *next, len(data), start)
	}
	*next = start + int64(len(data))
	return nil
}

// FuzzTail feeds random data in random chunks under small random limits and
// compares Bytes, Counts and Since with the byte-by-byte reference.
func FuzzTail(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte{3, 1, 7}, uint16(5), uint16(1), uint16(2))
	f.Add([]byte("a\nb\nc\nd\ne"), []byte{1}, uint16(0), uint16(3), uint16(0))
	f.Add([]byte("\n\n\n\n"), []byte{2, 0}, uint16(2), uint16(0), uint16(9))
	f.Add([]byte("ab\U0001F600cd\nef"), []byte{3, 2}, uint16(4), uint16(9), uint16(5))
	f.Add(bytes.Repeat([]byte("xyz\n"), 300), []byte{200, 13}, uint16(500), uint16(70), uint16(600))
	f.Fuzz(func(t *testing.T, data, cuts []byte, maxBytes, maxLines, since uint16) {
		l := Limits{MaxBytes: int(maxBytes), MaxLines: int(maxLines)}
		tl := New(l)
		writeChunked(tl, data, cuts)
		want, wantC := reference(data, l)
		if got := tl.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("Bytes() = %q, want %q", got, want)
		}
		if diff := cmp.Diff(wantC, tl.Counts()); diff != "" {
			t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
		}
		ringMax := DefaultMaxBytes
		if maxBytes > 0 {
			ringMax = int(maxBytes)
		}
		wantStart := min(int64(len(data)), max(int64(since), int64(len(data)-ringMax)))
		data2, start := tl.Since(int64(since))
		if start != wantStart || !bytes.Equal(data2, data[wantStart:]) {
			t.Errorf("Since(%d) = %q, %d; want %q, %d", since, data2, start, data[wantStart:], wantStart)
		}
	})
}

// writeChunked writes data to tl in chunks whose sizes cycle through cuts; a
// zero size writes an empty chunk and then a single byte.
func writeChunked(tl *Tail, data, cuts []byte) {
	if len(cuts) == 0 {
		cuts = []byte{255}
	}
	for i := 0; len(data) > 0; i++ {
		n := min(int(cuts[i%len(cuts)]), len(data))
		if n == 0 {
			tl.Write(data[:0])
			n = 1
		}
		tl.Write(data[:n])
		data = data[n:]
	}
}

// BenchmarkWrite64K writes 64 KiB chunks of 80-byte lines into a Tail whose
// ring wrapped long ago and into Tails still filling their ring, next to a
// plain copy of the same chunk into a buffer of the ring's size.
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
		tl := New(Limits{})
		for range 2 * DefaultMaxBytes / len(chunk) {
			tl.Write(chunk)
		}
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			tl.Write(chunk)
		}
	})
	b.Run("filling", func(b *testing.B) {
		// A fresh Tail every 8 chunks (512 KiB): the ring never wraps, and
		// its allocation on the first Write is part of the cost.
		tl := New(Limits{})
		b.SetBytes(int64(len(chunk)))
		i := 0
		for b.Loop() {
			if i%(DefaultMaxBytes/len(chunk)) == 0 {
				tl = New(Limits{})
			}
			tl.Write(chunk)
			i++
		}
	})
}

// sink keeps benchmark buffers alive so the compiler cannot drop the copies.
var sink []byte

func TestCopySince(t *testing.T) {
	tail := New(Limits{MaxBytes: 8, MaxLines: 100})
	tail.Write([]byte("0123456789ab")) // the ring holds 456789ab
	buf := make([]byte, 3)
	for _, tc := range []struct {
		off       int64
		want      string
		wantStart int64
	}{
		{0, "456", 4},  // the ring moved past 0: four bytes skipped
		{5, "567", 5},  // inside the ring, cut to the buffer
		{10, "ab", 10}, // the end of the stream
		{12, "", 12},   // at the end
		{99, "", 12},   // past the end
		{-3, "456", 4}, // negative is 0
	} {
		n, start := tail.CopySince(buf, tc.off)
		if got := string(buf[:n]); got != tc.want || start != tc.wantStart {
			t.Errorf("CopySince(%d) = %q at %d, want %q at %d", tc.off, got, start, tc.want, tc.wantStart)
		}
	}
}
