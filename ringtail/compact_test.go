package ringtail

import (
	"bytes"
	"testing"

	"github.com/corral-sh/corral/internal/heapsize"

	"github.com/google/go-cmp/cmp"
)

// TestCompact: a compacted Tail answers exactly as before and takes only
// what it holds; a Write after Compact grows the ring back and the Tail
// answers as if Compact never happened.
func TestCompact(t *testing.T) {
	t.Parallel()
	l := Limits{MaxBytes: 64, MaxLines: 3}
	tests := []struct {
		name   string
		before string // written before Compact
		after  string // written after it
	}{
		// Nothing written: no ring to shrink.
		{"empty", "", "x\n"},
		// Less than the ring: it shrinks to the content.
		{"short", "one\ntwo\n", "three\nfour\n"},
		// Between two size classes: it takes the larger.
		{"rounded", "one\ntwo\nsix\n", "seven\n"},
		// Past the line bound and the ring: already full, kept.
		{"wrapped", string(bytes.Repeat([]byte("abcdefghi\n"), 20)), "end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := New(l)
			tl.Write([]byte(tt.before))
			tl.Compact()
			wantBytes, wantCounts := reference([]byte(tt.before), l)
			if diff := cmp.Diff(wantBytes, tl.Bytes()); diff != "" {
				t.Errorf("Bytes after Compact (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantCounts, tl.Counts()); diff != "" {
				t.Errorf("Counts after Compact (-want +got):\n%s", diff)
			}
			if got, want := tl.Footprint(), heapsize.Of(min(len(tt.before), 64)); got != want {
				t.Errorf("Footprint after Compact = %d, want %d (the bytes held as the allocator rounds them, no scratch)", got, want)
			}
			if data, start := tl.Since(0); !bytes.Equal(data, []byte(tt.before)[start:]) {
				t.Errorf("Since(0) after Compact = %q at %d", data, start)
			}

			tl.Write([]byte(tt.after))
			all := []byte(tt.before + tt.after)
			wantBytes, wantCounts = reference(all, l)
			if diff := cmp.Diff(wantBytes, tl.Bytes()); diff != "" {
				t.Errorf("Bytes after a later Write (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantCounts, tl.Counts()); diff != "" {
				t.Errorf("Counts after a later Write (-want +got):\n%s", diff)
			}
			if data, start := tl.Since(0); !bytes.Equal(data, all[start:]) || start != max(0, int64(len(all))-64) {
				t.Errorf("Since(0) after a later Write = %q at %d", data, start)
			}
		})
	}
}
