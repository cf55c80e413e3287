package budget

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestWindow pins the cut rules on small pages.
func TestWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data       string
		maxB, maxL int
		final      bool
		text       string
		used       int
	}{
		{"a\nb\nc\n", 100, 2, false, "a\nb\n", 4},     // line bound
		{"aaa\nbbb\n", 6, 10, false, "aaa\n", 4},      // byte bound: after the last complete line
		{"abcdefgh", 5, 10, false, "abcde", 5},        // no line fits: a prefix
		{"ab\u00e9", 100, 10, false, "ab\u00e9", 4},   // complete character at the end
		{"ab\xc3", 100, 10, false, "ab", 2},           // incomplete: stays for the next page
		{"ab\xc3", 100, 10, true, "ab\uFFFD", 3},      // final: repaired, consumed
		{"abc\U0001F600", 5, 10, true, "abc", 3},      // a cut page is never final
		{"a\xffb\n", 100, 10, false, "a\uFFFDb\n", 4}, // invalid byte: repaired
		{"", 100, 10, true, "", 0},                    // nothing
	}
	for _, tc := range tests {
		text, used := Window([]byte(tc.data), Limits{MaxBytes: tc.maxB, MaxLines: tc.maxL}, tc.final)
		if text != tc.text || used != tc.used {
			t.Errorf("Window(%q, %d B, %d lines, final %v) = %q, %d; want %q, %d",
				tc.data, tc.maxB, tc.maxL, tc.final, text, used, tc.text, tc.used)
		}
	}
}

// TestWindowPagesEveryCut reads a multibyte stream page by page under every
// byte budget from 4 to 40: each page is valid UTF-8 within its budget, and
// the pages joined give the stream back.
func TestWindowPagesEveryCut(t *testing.T) {
	t.Parallel()
	stream := strings.Repeat("a\u00e9\u65e5\U0001F600\n\U00010348\u00fcz\n", 5)
	for maxB := 4; maxB <= 40; maxB++ {
		var got strings.Builder
		for rest := []byte(stream); len(rest) > 0; {
			text, used := Window(rest, Limits{MaxBytes: maxB, MaxLines: 3}, true)
			if used == 0 || len(text) > maxB || !utf8.ValidString(text) || strings.Count(text, "\n") > 3 {
				t.Fatalf("budget %d: page %q, used %d", maxB, text, used)
			}
			got.WriteString(text)
			rest = rest[used:]
		}
		if got.String() != stream {
			t.Fatalf("budget %d: pages joined to %q", maxB, got.String())
		}
	}
}
