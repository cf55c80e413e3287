package budget

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBatchView(t *testing.T) {
	t.Parallel()
	items := []BatchItem{
		{Command: "echo one", Text: "one\n[exit code 0 after 1ms]"},
		{Command: "echo two\necho more", Text: "two\n[exit code 0 after 1ms]"},
		{Command: "seq 3", Text: "1\n2\n3\n[exit code 0 after 2ms]"},
	}
	whole := "[1/3] $ echo one\none\n[exit code 0 after 1ms]\n" +
		"[2/3] $ echo two\ntwo\n[exit code 0 after 1ms]\n" +
		"[3/3] $ seq 3\n1\n2\n3\n[exit code 0 after 2ms]\n"
	tests := []struct {
		name  string
		limit int
		want  Batch
	}{
		// Everything fits: the whole text, no marker.
		{"fits", 4096, Batch{View: whole, KeptResults: 3, ViewBytes: len(whole), TotalBytes: len(whole)}},
		// Exactly the whole: still no marker.
		{"exact", len(whole), Batch{View: whole, KeptResults: 3, ViewBytes: len(whole), TotalBytes: len(whole)}},
		// The last result whole, the second cut to its last line under its header.
		{"cut on a line", 85, Batch{
			View: "[batch compacted: kept the last 2 of 3 results (85 of 134 bytes); limit 85B. Every result is kept whole in the session journal — read one with GET /v1/sessions/s1/results/<rid>.]\n" +
				"[2/3] $ echo two\n[exit code 0 after 1ms]\n[3/3] $ seq 3\n1\n2\n3\n[exit code 0 after 2ms]\n",
			Truncated: true, KeptResults: 2, ViewBytes: 85, TotalBytes: 134}},
		// A line of the second fits, but not with its header: the last result only.
		{"no room for the header", 72, Batch{
			View: "[batch compacted: kept the last 1 of 3 results (44 of 134 bytes); limit 72B. Every result is kept whole in the session journal — read one with GET /v1/sessions/s1/results/<rid>.]\n" +
				"[3/3] $ seq 3\n1\n2\n3\n[exit code 0 after 2ms]\n",
			Truncated: true, KeptResults: 1, ViewBytes: 44, TotalBytes: 134}},
		// The last result whole and not a line more.
		{"whole results only", 50, Batch{
			View: "[batch compacted: kept the last 1 of 3 results (44 of 134 bytes); limit 50B. Every result is kept whole in the session journal — read one with GET /v1/sessions/s1/results/<rid>.]\n" +
				"[3/3] $ seq 3\n1\n2\n3\n[exit code 0 after 2ms]\n",
			Truncated: true, KeptResults: 1, ViewBytes: 44, TotalBytes: 134}},
		// Not even the last line fits: its header and a suffix of it.
		{"single line", 24, Batch{
			View: "[batch compacted: kept the last 1 of 3 results (24 of 134 bytes); limit 24B. Every result is kept whole in the session journal — read one with GET /v1/sessions/s1/results/<rid>.]\n" +
				"[3/3] $ seq 3\nfter 2ms]\n",
			Truncated: true, KeptResults: 1, ViewBytes: 24, TotalBytes: 134}},
		// Not even the header fits: a suffix of the last line.
		{"smaller than the header", 10, Batch{
			View: "[batch compacted: kept the last 1 of 3 results (10 of 134 bytes); limit 10B. Every result is kept whole in the session journal — read one with GET /v1/sessions/s1/results/<rid>.]\n" +
				"fter 2ms]\n",
			Truncated: true, KeptResults: 1, ViewBytes: 10, TotalBytes: 134}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BatchView(items, BatchOptions{MaxBytes: tt.limit, Session: "s1"})
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestBatchViewNoJournal(t *testing.T) {
	t.Parallel()
	got := BatchView([]BatchItem{{Command: "x", Text: strings.Repeat("y\n", 100)}}, BatchOptions{MaxBytes: 20})
	want := "[batch compacted: kept the last 1 of 1 results (20 of 210 bytes); limit 20B. Every result is kept whole in the batch's results.]\n"
	if !strings.HasPrefix(got.View, want) {
		t.Errorf("view %q, want the prefix %q", got.View, want)
	}
}

func TestHeaderCommand(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	tests := []struct{ in, want string }{
		{"ls -l", "ls -l"},                           // as it is
		{"a\nb\nc", "a"},                             // the first line
		{"a\r\nb", "a"},                              // a CRLF line
		{"a\tb\x1b[0m", "a?b?[0m"},                   // control characters
		{"a\u0085b\u009b31m", "a?b?31m"},             // C1 controls: NEL, CSI
		{"a\u2028b\u2029c", "a?b?c"},                 // line and paragraph separators
		{"rm \u202e\u2066x\u2069\u200f", "rm ??x??"}, // bidi overrides and isolates
		{"é\u00a0✓", "é\u00a0✓"},                     // printable non-ASCII stays
		{"a\xffb", "a\uFFFDb"},                       // invalid UTF-8
		{long, strings.Repeat("é", 199) + "…"},       // clipped to 200 characters
		{long[:400], long[:400]},                     // exactly 200 characters
		{"\n", ""},                                   // an empty first line
		{strings.Repeat("x", 199) + "😀", strings.Repeat("x", 199) + "😀"}, // 200 characters, one wide
	}
	for _, tt := range tests {
		if got := HeaderCommand(tt.in); got != tt.want {
			t.Errorf("HeaderCommand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzBatchView checks BatchView against a reference: the text is bounded,
// valid UTF-8, the marker exact, and the kept tail the suffix of the whole
// that the cut rule allows.
func FuzzBatchView(f *testing.F) {
	seeds := []string{"", "a", "a\nb\n", strings.Repeat("😀", 50), "x\xffy\n\n", strings.Repeat("line\n", 40), "日本\n語"}
	for i, s := range seeds {
		f.Add(s, s+"\n"+s, "cmd\t"+s, uint16(i*53), uint8(1+i%5))
	}
	f.Fuzz(func(t *testing.T, text1, text2, cmd string, lim uint16, n uint8) {
		items := make([]BatchItem, 1+int(n)%6)
		for i := range items {
			items[i] = BatchItem{Command: cmd, Text: pick(i%2 == 0, text1, text2)}
		}
		checkBatch(t, items, 4+int(lim)%700)
	})
}

// TestBatchAgainstReference runs the fuzz checks over generated inputs.
func TestBatchAgainstReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "bc", "\n", "\n", "é", "😀", "日本", "\xff", "\r", "word ", strings.Repeat("x", 40)}
	gen := func(k int) string {
		var b strings.Builder
		for range rng.IntN(k) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for range 2000 {
		items := make([]BatchItem, 1+rng.IntN(6))
		for i := range items {
			items[i] = BatchItem{Command: gen(8), Text: gen(40)}
		}
		checkBatch(t, items, 4+rng.IntN(300))
	}
}

func pick[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

// checkBatch renders items under limit and checks the result against the
// reference rendering.
func checkBatch(t *testing.T, items []BatchItem, limit int) {
	t.Helper()
	// The reference whole text and where each section starts.
	var whole strings.Builder
	starts := make([]int, len(items))
	for i, it := range items {
		starts[i] = whole.Len()
		fmt.Fprintf(&whole, "[%d/%d] $ %s\n", i+1, len(items), refHeader(it.Command))
		whole.WriteString(strings.ToValidUTF8(it.Text, "\uFFFD"))
		if it.Text != "" && !strings.HasSuffix(it.Text, "\n") {
			whole.WriteByte('\n')
		}
	}
	full := whole.String()
	got := BatchView(items, BatchOptions{MaxBytes: limit, Session: "s"})
	if !utf8.ValidString(got.View) {
		t.Fatalf("view not valid UTF-8: %q", got.View)
	}
	if got.TotalBytes != len(full) {
		t.Fatalf("totalBytes %d, reference %d", got.TotalBytes, len(full))
	}
	if !got.Truncated {
		if len(full) > limit || got.View != full || got.KeptResults != len(items) || got.ViewBytes != len(full) {
			t.Fatalf("untruncated %+v for %q under %d", got, full, limit)
		}
		return
	}
	if len(full) <= limit {
		t.Fatalf("truncated a text of %d bytes under %d", len(full), limit)
	}
	mark, tail, ok := strings.Cut(got.View, "\n")
	if !ok || tail == "" || len(tail) > limit || len(tail) != got.ViewBytes {
		t.Fatalf("tail %q (viewBytes %d) is not a non-empty text within %d", tail, got.ViewBytes, limit)
	}
	section := func(j int) (start, bodyStart, end int) {
		end = len(full)
		if j+1 < len(items) {
			end = starts[j+1]
		}
		return starts[j], strings.IndexByte(full[starts[j]:], '\n') + starts[j] + 1, end
	}
	within := func(i int) int { // the section holding offset i
		j := 0
		for j+1 < len(items) && starts[j+1] <= i {
			j++
		}
		return j
	}
	// The kept text is a suffix of the whole from a result's start, or a cut
	// result's header line and a suffix of its text, or, when not even that
	// header fits, a suffix of the last result.
	var cut, header int
	if strings.HasSuffix(full, tail) && atSection(starts, len(full)-len(tail)) {
		cut = len(full) - len(tail)
		if s0, b0, end := section(within(cut - 1)); b0 < end {
			lastLine := strings.LastIndexByte(full[b0:end-1], '\n') + b0 + 1
			if (b0-s0)+(end-lastLine)+len(tail) <= limit {
				t.Fatalf("whole results from %d, but the header of the one before and its last line fit %d: %q", cut, limit, full)
			}
		}
	} else {
		found := false
		for j := range items {
			s0, b0, end := section(j)
			h := full[s0:b0]
			if strings.HasPrefix(tail, h) && strings.HasSuffix(full, tail[len(h):]) {
				if c := len(full) - len(tail) + len(h); c > b0 && c < end {
					cut, header, found = c, len(h), true
					break
				}
			}
		}
		if !found && strings.HasSuffix(full, tail) && len(tail) <= len(full)-starts[len(items)-1] {
			cut, found = len(full)-len(tail), true
			if _, b0, _ := section(len(items) - 1); b0-starts[len(items)-1] < limit {
				t.Fatalf("a bare suffix %q though the header fits %d", tail, limit)
			}
		}
		if !found {
			t.Fatalf("tail %q is neither a suffix of the whole from a result's start nor a header and a suffix of its text: %q", tail, full)
		}
		suffix := full[cut:]
		if full[cut-1] == '\n' {
			// On a line boundary: the line before it would not have fit.
			prev := strings.LastIndexByte(full[:cut-1], '\n') + 1
			if header+len(full)-prev <= limit {
				t.Fatalf("cut at %d, but the line from %d fits %d: %q", cut, prev, limit, full)
			}
		} else if strings.Contains(suffix[:len(suffix)-1], "\n") || len(tail) <= limit-utf8.UTFMax || within(cut) != len(items)-1 {
			// Inside a line: only the last line, and only when it alone is too long.
			t.Fatalf("cut inside a line at %d keeping %q under %d", cut, tail, limit)
		}
	}
	kept := 0
	for i := range items {
		if i == len(items)-1 || starts[i+1] > cut {
			kept++
		}
	}
	want := fmt.Sprintf("[batch compacted: kept the last %d of %d results (%d of %d bytes); limit %s. "+
		"Every result is kept whole in the session journal — read one with GET /v1/sessions/s/results/<rid>.]",
		kept, len(items), len(tail), len(full), refBytes(limit))
	if mark != want || got.KeptResults != kept {
		t.Fatalf("marker %q (kept %d)\nwant   %q", mark, got.KeptResults, want)
	}
}

// refHeader is the reference of HeaderCommand.
func refHeader(cmd string) string {
	line := strings.Split(cmd, "\n")[0]
	line = strings.TrimSuffix(line, "\r")
	r := []rune(strings.ToValidUTF8(line, "\uFFFD"))
	for i, c := range r {
		if c < 0x20 || 0x7f <= c && c <= 0x9f || c == 0x61c || c == 0x200e || c == 0x200f ||
			0x2028 <= c && c <= 0x202e || 0x2066 <= c && c <= 0x2069 {
			r[i] = '?'
		}
	}
	if len(r) > MaxHeaderChars {
		return string(r[:MaxHeaderChars-1]) + "…"
	}
	return string(r)
}

// atSection reports whether offset i starts a section (or is the end).
func atSection(starts []int, i int) bool {
	for _, s := range starts {
		if s == i {
			return true
		}
	}
	return false
}
