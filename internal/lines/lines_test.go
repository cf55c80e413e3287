package lines

import (
	"bytes"
	"strings"
	"testing"
)

func TestAfterNewline(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ab\n", 5000) // crosses several 4 KiB blocks
	tests := []struct {
		p    string
		k    int64
		want int
	}{
		{"a\nb\nc", 1, 2},   // first newline
		{"a\nb\nc", 2, 4},   // second
		{"a\nb\nc", 3, 5},   // fewer newlines than k: len(p)
		{"", 1, 0},          // empty
		{"\n\n\n", 3, 3},    // only newlines
		{long, 4000, 12000}, // past block boundaries
		{long, 5000, 15000}, // the last newline
		{strings.Repeat("x", 9000) + "\n", 1, 9001}, // one long line
	}
	for _, tc := range tests {
		if got := AfterNewline([]byte(tc.p), tc.k); got != tc.want {
			t.Errorf("AfterNewline(%d bytes, %d) = %d, want %d", len(tc.p), tc.k, got, tc.want)
		}
	}
}

// FuzzAfterNewline checks against a per-byte reference.
func FuzzAfterNewline(f *testing.F) {
	f.Add([]byte("a\nb\n"), uint16(1))
	f.Add(bytes.Repeat([]byte("xy\n"), 3000), uint16(2500))
	f.Fuzz(func(t *testing.T, p []byte, k uint16) {
		if k == 0 {
			return
		}
		want, seen := len(p), int64(0)
		for i, b := range p {
			if b == '\n' {
				if seen++; seen == int64(k) {
					want = i + 1
					break
				}
			}
		}
		if got := AfterNewline(p, int64(k)); got != want {
			t.Fatalf("AfterNewline = %d, want %d", got, want)
		}
		if got, want := Count(p), int64(bytes.Count(p, []byte{'\n'})); got != want {
			t.Fatalf("Count = %d, want %d", got, want)
		}
	})
}
