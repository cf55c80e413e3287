package utf8cut

import (
	"testing"
	"unicode/utf8"
)

// multibyte holds characters of every encoded length.
const multibyte = "a\u00e9\u65e5\U0001F600z\u00fc\U00010348\n"

// TestEveryCut cuts a string of 1- to 4-byte characters at every byte and
// checks each helper against the reference: the nearest cut that leaves
// valid UTF-8.
func TestEveryCut(t *testing.T) {
	t.Parallel()
	s := []byte(multibyte + multibyte)
	for k := 0; k <= len(s); k++ {
		if got, want := Complete(s[:k]), refComplete(s, k); got != want {
			t.Errorf("Complete(s[:%d]) = %d, want %d", k, got, want)
		}
		if got, want := k+Start(s[k:]), k+refStart(s, k); got != want {
			t.Errorf("Start(s[%d:]) = %d, want %d", k, got-k, want-k)
		}
		if got, want := Prefix(s, k), refComplete(s, k); got != want {
			t.Errorf("Prefix(s, %d) = %d, want %d", k, got, want)
		}
		if got, want := Suffix(s, len(s)-k), len(s)-k-refStart(s, k); got != want {
			t.Errorf("Suffix(s, %d) = %d, want %d", len(s)-k, got, want)
		}
	}
}

// TestNotUTF8 pins what the helpers do with bytes that are not UTF-8: they
// are left to the caller, never cut away.
func TestNotUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p             string
		complete, pos int
	}{
		{"", 0, 0},                         // empty
		{"ab\xff", 3, 0},                   // an invalid byte is not incomplete
		{"ab\x80\x80\x80\x80", 6, 0},       // continuation bytes with no start
		{"\x80\x80", 2, 0},                 // too short to tell
		{"\xe2\x82\xac\x80", 4, 0},         // one continuation byte too many
		{"x\xc0", 2, 0},                    // C0 never starts a character
		{"x\xe0\x80", 3, 0},                // overlong: E0 needs A0..BF next
		{"x\xf0\x9f\x98", 1, 0},            // three bytes of four: incomplete
		{"\x9f\x98\x80tail\xf0\x9f", 7, 3}, // cut at both ends
	}
	for _, tc := range tests {
		p := []byte(tc.p)
		if got := Complete(p); got != tc.complete {
			t.Errorf("Complete(%q) = %d, want %d", tc.p, got, tc.complete)
		}
		if got := Start(p); got != tc.pos {
			t.Errorf("Start(%q) = %d, want %d", tc.p, got, tc.pos)
		}
	}
}

// FuzzCut checks the helpers on any bytes against properties, and on valid
// UTF-8 against the utf8.Valid reference at the fuzzer's cut.
func FuzzCut(f *testing.F) {
	f.Add([]byte(multibyte), uint16(3))
	f.Add([]byte("\xf0\x9f\x98\x80\xe6\x97"), uint16(5))
	f.Add([]byte("\x80\x80\x80\x80\xc3"), uint16(1))
	f.Fuzz(func(t *testing.T, p []byte, cut uint16) {
		n := Complete(p)
		if n < len(p)-(utf8.UTFMax-1) || n > len(p) {
			t.Fatalf("Complete(%q) = %d: more than %d bytes cut", p, n, utf8.UTFMax-1)
		}
		if n < len(p) && (utf8.FullRune(p[n:]) || !utf8.RuneStart(p[n])) {
			t.Fatalf("Complete(%q) = %d cut a sequence that is not incomplete", p, n)
		}
		if s := Start(p); s >= utf8.UTFMax || s > len(p) {
			t.Fatalf("Start(%q) = %d", p, s)
		}
		if !utf8.Valid(p) {
			return
		}
		k := int(cut) % (len(p) + 1)
		if got, want := Complete(p[:k]), refComplete(p, k); got != want {
			t.Fatalf("Complete(%q[:%d]) = %d, want %d", p, k, got, want)
		}
		if got, want := Start(p[k:]), refStart(p, k); got != want {
			t.Fatalf("Start(%q[%d:]) = %d, want %d", p, k, got, want)
		}
	})
}

// refComplete is the reference for valid s cut at k: the longest prefix of
// s[:k] that is valid UTF-8.
func refComplete(s []byte, k int) int {
	for n := k; n >= 0; n-- {
		if utf8.Valid(s[:n]) {
			return n
		}
	}
	return 0
}

// refStart is the reference for valid s cut at k: how many bytes of s[k:]
// to skip so that the rest is valid UTF-8, 0 when only continuation bytes
// are left (Start then cannot tell).
func refStart(s []byte, k int) int {
	for j := 0; k+j < len(s); j++ {
		if utf8.Valid(s[k+j:]) {
			return j
		}
	}
	return 0
}
