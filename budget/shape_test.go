package budget

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// numbered returns n lines "line <from>\n" … "line <from+n-1>\n".
func numbered(from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// The spec's three example markers (§3), byte for byte, with <path> filled in.
const (
	specPath   = "/data/scratch/s1/tool-output/bash-1700000000000-1.log"
	specHead   = "[truncated: kept the first 4000 of 51234 lines; limit 4000 lines / 96KB. Full output saved to " + specPath + " — Grep it, or Read it with offset/limit.]"
	specTail   = "[truncated: kept the last 1200 of 51234 lines; limit 4000 lines / 96KB. Narrow the request to see more.]"
	specSingle = "[truncated: no complete line fits the 96KB limit; kept 98304 bytes of a single 4200000-byte line. Full output saved to " + specPath + " — Grep it, or Read it with offset/limit.]"
)

func TestShapeSpecExamples(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 5000) + "\n"
	tailKept := strings.Repeat(strings.Repeat("e", 79)+"\n", 1200) // 96000 bytes
	single := strings.Repeat("s", 512<<10)                         // the capture kept 512 KiB of one line
	tests := []struct {
		name string
		data string
		c    Counts
		o    Options
		want string
	}{
		// Head cut by the line limit, with a spill file.
		{"first 4000 of 51234", numbered(1, 10000),
			Counts{TotalBytes: 600000, TotalLines: 51234, CapturedBytes: int64(len(numbered(1, 10000))), CapturedLines: 10000, OmittedBytes: 1, OmittedLines: 41234},
			Options{SpillPath: specPath},
			numbered(1, 4000) + specHead},
		// Tail cut by the byte limit: a 5000-byte line does not fit after 1200 lines of 80 bytes.
		{"last 1200 of 51234", numbered(1, 20) + big + tailKept,
			Counts{TotalBytes: 4000000, TotalLines: 51234, CapturedBytes: 524288, CapturedLines: 1221, OmittedBytes: 1, OmittedLines: 50013},
			Options{Policy: PolicyTail},
			specTail + "\n" + tailKept},
		// One 4,200,000-byte line: a 96 KiB prefix of it.
		{"single 4200000-byte line", single,
			Counts{TotalBytes: 4200001, TotalLines: 1, CapturedBytes: 512 << 10, OmittedBytes: 4200001 - 512<<10, EdgeLineBytes: 4200000},
			Options{SpillPath: specPath},
			single[:98304] + "\n" + specSingle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, info := Shape([]byte(tt.data), tt.c, tt.o)
			if got != tt.want {
				t.Errorf("view differs:\n got tail %q\nwant tail %q", lastBytes(got, 400), lastBytes(tt.want, 400))
				t.Errorf("view head: got %q want %q", got[:min(200, len(got))], tt.want[:min(200, len(tt.want))])
			}
			if !info.Truncated || info.TotalLines != 51234 && info.TotalLines != 1 {
				t.Errorf("info: %+v", info)
			}
		})
	}
}

// lastBytes returns at most n bytes from the end of s.
func lastBytes(s string, n int) string { return s[max(0, len(s)-n):] }

func TestShapeMarkerForms(t *testing.T) {
	t.Parallel()
	small := Limits{MaxBytes: 1024, MaxLines: 2}
	long := strings.Repeat("y", 2000)
	tests := []struct {
		name     string
		data     string
		c        Counts
		o        Options
		want     string
		wantInfo Info
	}{
		// Nothing to cut: the view is the data, no marker.
		{"fits", "a\nb\n", Counts{}, Options{Limits: small}, "a\nb\n",
			Info{TotalBytes: 4, TotalLines: 2, KeptBytes: 4, KeptLines: 2, CapturedBytes: 4}},
		// Empty stream: empty view, no marker.
		{"empty", "", Counts{}, Options{}, "", Info{}},
		// Head cut by lines, marker appended.
		{"head lines", "a\nb\nc\n", Counts{}, Options{Limits: small},
			"a\nb\n[truncated: kept the first 2 of 3 lines; limit 2 lines / 1KB. Narrow the request to see more.]",
			Info{Truncated: true, TotalBytes: 6, TotalLines: 3, KeptBytes: 4, KeptLines: 2, CapturedBytes: 6}},
		// Head cut by bytes; a budget that is not a multiple of 1024 is stated in bytes.
		{"head bytes", "aaaa\nbbbb\n", Counts{}, Options{Limits: Limits{MaxBytes: 7, MaxLines: 10}},
			"aaaa\n[truncated: kept the first 1 of 2 lines; limit 10 lines / 7B. Narrow the request to see more.]",
			Info{Truncated: true, TotalBytes: 10, TotalLines: 2, KeptBytes: 5, KeptLines: 1, CapturedBytes: 10}},
		// Nothing cut here but the capture layer omitted the rest: marker on its own line.
		{"head omitted", "a\nb", Counts{TotalBytes: 9, TotalLines: 5, CapturedBytes: 3, CapturedLines: 2, OmittedBytes: 6, OmittedLines: 3}, Options{Limits: Limits{MaxLines: 10}},
			"a\nb\n[truncated: kept the first 2 of 5 lines; limit 10 lines / 96KB. Narrow the request to see more.]",
			Info{Truncated: true, TotalBytes: 9, TotalLines: 5, KeptBytes: 3, KeptLines: 2, CapturedBytes: 3, OmittedBytes: 6, OmittedLines: 3}},
		// Tail cut by lines, marker prepended and followed by a newline.
		{"tail lines", "a\nb\nc\n", Counts{}, Options{Policy: PolicyTail, Limits: small},
			"[truncated: kept the last 2 of 3 lines; limit 2 lines / 1KB. Narrow the request to see more.]\nb\nc\n",
			Info{Truncated: true, TotalBytes: 6, TotalLines: 3, KeptBytes: 4, KeptLines: 2, CapturedBytes: 6}},
		// Tail whose last line lacks a newline.
		{"tail unterminated", "a\nb\nc", Counts{}, Options{Policy: PolicyTail, Limits: small},
			"[truncated: kept the last 2 of 3 lines; limit 2 lines / 1KB. Narrow the request to see more.]\nb\nc",
			Info{Truncated: true, TotalBytes: 5, TotalLines: 3, KeptBytes: 3, KeptLines: 2, CapturedBytes: 5}},
		// Head single-line form: a prefix of the first line.
		{"head single", long + "\nz\n", Counts{}, Options{Limits: small, SpillPath: "/s/x.log"},
			long[:1024] + "\n[truncated: no complete line fits the 1KB limit; kept 1024 bytes of a single 2000-byte line. Full output saved to /s/x.log — Grep it, or Read it with offset/limit.]",
			Info{Truncated: true, TotalBytes: 2003, TotalLines: 2, KeptBytes: 1024, KeptLines: 1, CapturedBytes: 2003, SpillPath: "/s/x.log"}},
		// Tail single-line form: a suffix of the last line, marker first.
		{"tail single", "z\n" + long + "\n", Counts{}, Options{Policy: PolicyTail, Limits: small},
			"[truncated: no complete line fits the 1KB limit; kept 1024 bytes of a single 2000-byte line. Narrow the request to see more.]\n" + long[:1024],
			Info{Truncated: true, TotalBytes: 2003, TotalLines: 2, KeptBytes: 1024, KeptLines: 1, CapturedBytes: 2003}},
		// Head+tail: first and last halves of the allowed lines, marker between.
		{"head+tail", numbered(1, 10), Counts{}, Options{Policy: PolicyHeadTail, Limits: Limits{MaxBytes: 1024, MaxLines: 4}},
			"line 1\nline 2\n[truncated: kept the first 2 and the last 2 of 10 lines; limit 4 lines / 1KB. Narrow the request to see more.]\nline 9\nline 10\n",
			Info{Truncated: true, TotalBytes: 71, TotalLines: 10, KeptBytes: 29, KeptLines: 4, CapturedBytes: 71}},
		// Head+tail with an odd line limit: the head gets the extra line.
		{"head+tail odd", numbered(1, 10), Counts{}, Options{Policy: PolicyHeadTail, Limits: Limits{MaxBytes: 1024, MaxLines: 3}},
			"line 1\nline 2\n[truncated: kept the first 2 and the last 1 of 10 lines; limit 3 lines / 1KB. Narrow the request to see more.]\nline 10\n",
			Info{Truncated: true, TotalBytes: 71, TotalLines: 10, KeptBytes: 22, KeptLines: 3, CapturedBytes: 71}},
		// Head+tail that fits: unchanged.
		{"head+tail fits", "a\nb\n", Counts{}, Options{Policy: PolicyHeadTail, Limits: small}, "a\nb\n",
			Info{TotalBytes: 4, TotalLines: 2, KeptBytes: 4, KeptLines: 2, CapturedBytes: 4}},
		// Head+tail whose first line exceeds half the bytes falls back to a head cut.
		{"head+tail fallback", strings.Repeat("h", 600) + "\n" + numbered(1, 100), Counts{}, Options{Policy: PolicyHeadTail, Limits: Limits{MaxBytes: 1024, MaxLines: 100}},
			strings.Repeat("h", 600) + "\n" + numbered(1, 54) + "[truncated: kept the first 55 of 101 lines; limit 100 lines / 1KB. Narrow the request to see more.]",
			Info{Truncated: true, TotalBytes: 601 + int64(len(numbered(1, 100))), TotalLines: 101, KeptBytes: 601 + int64(len(numbered(1, 54))), KeptLines: 55, CapturedBytes: 601 + int64(len(numbered(1, 100)))}},
		// Binary output with a spill file.
		{"binary spilled", "\x00\x01\x02abc", Counts{TotalBytes: 9000, TotalLines: 3, CapturedBytes: 6}, Options{SpillPath: "/s/b.log"},
			"[binary output: 9000 bytes; saved to /s/b.log]",
			Info{Truncated: true, TotalBytes: 9000, TotalLines: 3, CapturedBytes: 6, SpillPath: "/s/b.log", Binary: true}},
		// Binary output, nothing saved.
		{"binary", "\x00abc", Counts{}, Options{},
			"[binary output: 4 bytes]",
			Info{Truncated: true, TotalBytes: 4, TotalLines: 1, CapturedBytes: 4, Binary: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, info := Shape([]byte(tt.data), tt.c, tt.o)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("view (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantInfo, info); diff != "" {
				t.Errorf("info (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShapeMarkerBound(t *testing.T) {
	t.Parallel()
	path := "/" + strings.Repeat("dir/", 200) + "ü.log"
	for _, o := range []Options{
		{SpillPath: path},
		{SpillPath: path, Policy: PolicyTail},
		{SpillPath: path, Limits: Limits{MaxBytes: 10}},
	} {
		got, info := Shape([]byte(numbered(1, 5000)+strings.Repeat("w", 20)), Counts{}, o)
		mark := got[strings.LastIndex(got, "[truncated: "):]
		if o.Policy == PolicyTail {
			mark = got[:strings.IndexByte(got, '\n')]
		}
		if len(mark) > MaxMarkerBytes || !strings.Contains(mark, "…") || !utf8.ValidString(mark) || !info.Truncated {
			t.Errorf("%+v: marker of %d bytes: %q", o, len(mark), mark)
		}
		if !strings.HasSuffix(mark, "ü.log — Grep it, or Read it with offset/limit.]") {
			t.Errorf("marker lost the end of the path: %q", mark)
		}
	}
	bin, _ := Shape([]byte{0, 1, 2}, Counts{}, Options{SpillPath: path})
	if len(bin) > MaxMarkerBytes || !strings.HasPrefix(bin, "[binary output: 3 bytes; saved to /dir/") {
		t.Errorf("binary line of %d bytes: %q", len(bin), bin)
	}
	// A path with a newline cannot break the marker's line.
	got, _ := Shape([]byte("a\nb\n"), Counts{}, Options{SpillPath: "x\ny", Limits: Limits{MaxLines: 1}})
	if want := "a\n[truncated: kept the first 1 of 2 lines; limit 1 lines / 96KB. Full output saved to x?y — Grep it, or Read it with offset/limit.]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestShapeUTF8Edges(t *testing.T) {
	t.Parallel()
	grin := "😀" // 4 bytes
	line := strings.Repeat(grin, 1000)
	tests := []struct {
		name     string
		data     string
		c        Counts
		o        Options
		want     string
		wantInfo Info
	}{
		// A 4-byte character straddles the byte budget: the head keeps the characters before it.
		{"head budget edge", line, Counts{}, Options{Limits: Limits{MaxBytes: 1026}},
			strings.Repeat(grin, 256) + "\n[truncated: no complete line fits the 1026B limit; kept 1024 bytes of a single 4000-byte line. Narrow the request to see more.]",
			Info{Truncated: true, TotalBytes: 4000, TotalLines: 1, KeptBytes: 1024, KeptLines: 1, CapturedBytes: 4000}},
		// The same for the tail: the suffix starts at the next character.
		{"tail budget edge", "a" + line, Counts{}, Options{Policy: PolicyTail, Limits: Limits{MaxBytes: 1027}},
			"[truncated: no complete line fits the 1027B limit; kept 1024 bytes of a single 4001-byte line. Narrow the request to see more.]\n" + strings.Repeat(grin, 256),
			Info{Truncated: true, TotalBytes: 4001, TotalLines: 1, KeptBytes: 1024, KeptLines: 1, CapturedBytes: 4001}},
		// The capture ceiling split a character at the end of the head: it is dropped, not replaced.
		{"head ceiling edge", "ab" + grin[:2], Counts{TotalBytes: 10, TotalLines: 1, CapturedBytes: 4, OmittedBytes: 6}, Options{},
			"ab\n[truncated: kept the first 1 of 1 lines; limit 4000 lines / 96KB. Narrow the request to see more.]",
			Info{Truncated: true, TotalBytes: 10, TotalLines: 1, KeptBytes: 2, KeptLines: 1, CapturedBytes: 4, OmittedBytes: 6}},
		// The ring split a character at the start of the tail: its continuation bytes are dropped.
		{"tail ceiling edge", grin[1:] + "ab\n", Counts{TotalBytes: 10, TotalLines: 1, CapturedBytes: 6, OmittedBytes: 4}, Options{Policy: PolicyTail},
			"[truncated: kept the last 1 of 1 lines; limit 4000 lines / 96KB. Narrow the request to see more.]\nab\n",
			Info{Truncated: true, TotalBytes: 10, TotalLines: 1, KeptBytes: 3, KeptLines: 1, CapturedBytes: 6, OmittedBytes: 4}},
		// Invalid bytes inside the stream become U+FFFD, one per byte, and are counted.
		{"invalid bytes", "a\xffb\xc3 some text\n" + grin[:3] + " more text\n", Counts{}, Options{},
			"a\uFFFDb\uFFFD some text\n\uFFFD\uFFFD\uFFFD more text\n",
			Info{TotalBytes: 29, TotalLines: 2, KeptBytes: 39, KeptLines: 2, CapturedBytes: 29, InvalidBytes: 5}},
		// Raw mode still repairs UTF-8.
		{"invalid raw", "\xfe\n", Counts{}, Options{Raw: true}, "\uFFFD\n",
			Info{TotalBytes: 2, TotalLines: 1, KeptBytes: 4, KeptLines: 1, CapturedBytes: 2, InvalidBytes: 1}},
		// A 4-byte character right at a budget of 4 bytes: one character is always kept.
		{"minimum budget", grin + grin, Counts{}, Options{Limits: Limits{MaxBytes: 1}},
			grin + "\n[truncated: no complete line fits the 4B limit; kept 4 bytes of a single 8-byte line. Narrow the request to see more.]",
			Info{Truncated: true, TotalBytes: 8, TotalLines: 1, KeptBytes: 4, KeptLines: 1, CapturedBytes: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, info := Shape([]byte(tt.data), tt.c, tt.o)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("view (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantInfo, info); diff != "" {
				t.Errorf("info (-want +got):\n%s", diff)
			}
			if !utf8.ValidString(got) {
				t.Errorf("view is not valid UTF-8")
			}
		})
	}
}

func TestShapeCleanup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		data             string
		raw              bool
		want             string
		escapes, redraws int64
	}{
		// SGR colour codes.
		{"sgr", "\x1b[1;31mred\x1b[0m\n", false, "red\n", 2, 0},
		// OSC window title ended by BEL.
		{"osc bel", "\x1b]0;title\x07text\n", false, "text\n", 1, 0},
		// OSC 8 hyperlink ended by ST.
		{"osc st", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n", false, "link\n", 2, 0},
		// Two-character sequences (save/restore cursor).
		{"two-char", "\x1b7saved\x1b8\n", false, "saved\n", 2, 0},
		// Charset designation (nF).
		{"nF", "\x1b(Babc\n", false, "abc\n", 1, 0},
		// Private CSI with intermediates.
		{"csi private", "\x1b[?25lx\x1b[?25h\n", false, "x\n", 2, 0},
		// Progress redraws collapse to the last state.
		{"redraw", "10%\r20%\r30%\n", false, "30%\n", 0, 2},
		// CRLF just loses its CR.
		{"crlf", "a\r\nb\r\n", false, "a\nb\n", 0, 0},
		// Erase-line plus CR redraws, the usual progress bar.
		{"progress", "\x1b[2K\rfoo 1\x1b[2K\rfoo 2\n", false, "foo 2\n", 2, 1},
		// An escape cut by the end of the data is dropped.
		{"cut csi", "abc\x1b[", false, "abc", 1, 0},
		// A lone ESC before a newline never removes the newline.
		{"lone esc", "a\x1b\nb\n", false, "a\nb\n", 1, 0},
		// An unterminated OSC stops at the end of its line.
		{"osc unterminated", "\x1b]0;never ended\nnext\n", false, "\nnext\n", 1, 0},
		// Raw mode keeps escapes and carriage returns.
		{"raw", "\x1b[31mred\r\n", true, "\x1b[31mred\r\n", 0, 0},
		// Raw mode does not call NUL-bearing output binary, but a NUL never
		// reaches the view as it is.
		{"raw nul", "a\x00b\n", true, "a\uFFFDb\n", 0, 0},
		// Heavily coloured text is text, not binary.
		{"colour heavy", strings.Repeat("\x1b[31m\x1b[0m", 50) + "ok\n", false, "ok\n", 100, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, info := Shape([]byte(tt.data), Counts{}, Options{Raw: tt.raw})
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if info.EscapesRemoved != tt.escapes || info.RedrawsCollapsed != tt.redraws || info.Truncated || info.Binary {
				t.Errorf("info %+v; want escapes %d redraws %d", info, tt.escapes, tt.redraws)
			}
			if int64(len(got)) != info.KeptBytes || countLines([]byte(got)) != info.KeptLines {
				t.Errorf("kept %d bytes %d lines, view has %d bytes %d lines", info.KeptBytes, info.KeptLines, len(got), countLines([]byte(got)))
			}
		})
	}
}

func TestLooksBinary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data []byte
		want bool
	}{
		// A NUL byte anywhere in the first 4 KiB.
		{"nul", []byte("hello\x00world"), true},
		// A NUL byte past the first 4 KiB is not sniffed.
		{"late nul", append([]byte(strings.Repeat("a", 5000)), 0), false},
		// 40% control bytes.
		{"controls", []byte(strings.Repeat("\x01\x02abc", 100)), true},
		// 20% control bytes is still text.
		{"few controls", []byte(strings.Repeat("\x01abcd", 100)), false},
		// Mostly invalid UTF-8 (Latin-1 noise).
		{"invalid", []byte(strings.Repeat("\xe9\xe8a", 100)), true},
		// Multi-byte text cut by the window's edge is not judged on the cut.
		{"utf8 text", []byte(strings.Repeat("日本語", 2000)), false},
		// Empty input.
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := looksBinary(tt.data); got != tt.want {
				t.Errorf("looksBinary = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	for _, p := range []Policy{PolicyHead, PolicyTail, PolicyHeadTail} {
		if got, err := ParsePolicy(string(p)); got != p || err != nil {
			t.Errorf("ParsePolicy(%q) = %q, %v", p, got, err)
		}
	}
	for _, s := range []string{"", "middle", "HEAD"} {
		_, err := ParsePolicy(s)
		if !errorsIs(err, ErrInvalid) || !strings.Contains(err.Error(), `"head+tail"`) || s != "" && !strings.Contains(err.Error(), s) {
			t.Errorf("ParsePolicy(%q) error = %v", s, err)
		}
	}
}

// TestSpillSentencePartial: the spill sentence says "Full output" only of a
// whole copy; a copy that stopped at a ceiling names the bytes it holds.
func TestSpillSentencePartial(t *testing.T) {
	t.Parallel()
	lim := Limits{MaxLines: 1}
	data := []byte("a\nb\n")
	for _, c := range []struct {
		name string
		kept SpillKept
		want string
	}{
		// No SpillKept: a whole copy.
		{"whole", SpillKept{}, " Full output saved to /s/x.log — Grep it"},
		// Parts that add up to the stream: a whole copy.
		{"whole by extent", SpillKept{HeadBytes: 4, StreamBytes: 4}, " Full output saved to /s/x.log — Grep it"},
		// The head up to a ceiling.
		{"head", SpillKept{HeadBytes: 3, StreamBytes: 900}, " Output up to byte 3 of 900 saved to /s/x.log — Grep it"},
		// The tail after the start was dropped.
		{"tail", SpillKept{TailBytes: 100, StreamBytes: 900}, " Output after byte 800 of 900 saved to /s/x.log — Grep it"},
		// Both ends with a gap.
		{"both", SpillKept{HeadBytes: 10, TailBytes: 100, StreamBytes: 900}, " Output up to byte 10 and after byte 800 of 900 saved to /s/x.log — Grep it"},
	} {
		got, _ := Shape(data, Counts{}, Options{Limits: lim, SpillPath: "/s/x.log", SpillKept: c.kept})
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.name, got, c.want)
		}
	}
	bin, _ := Shape([]byte{0, 1, 2}, Counts{}, Options{SpillPath: "/s/b.log", SpillKept: SpillKept{HeadBytes: 3, StreamBytes: 9}})
	if want := "[binary output: 3 bytes; output up to byte 3 of 9 saved to /s/b.log]"; bin != want {
		t.Errorf("binary: %q, want %q", bin, want)
	}
}
