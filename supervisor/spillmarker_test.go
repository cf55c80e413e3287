package supervisor

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestSpillMarkerAtCeiling: a stream longer than the capture ceiling is
// spilled only up to the ceiling, so its marker says which bytes the file
// holds ("Output up to byte N of M", "Output after byte X of M") and never
// "Full output"; the file holds exactly those bytes.
func TestSpillMarkerAtCeiling(t *testing.T) {
	t.Parallel()
	const ceiling = 64 << 10
	s := newSup(t, Config{DataDir: t.TempDir(), Capture: CaptureLimits{MaxBytes: ceiling}})
	// 200,000 bytes on each stream: 20,000 lines of "123456789\n".
	res := run(t, s, Request{Command: `yes 123456789 | head -n 20000; yes 123456789 | head -n 20000 >&2`, Session: "s1"})
	for _, c := range []struct {
		name, view, sentence string
		path                 string
	}{
		{"stdout", res.Stdout, fmt.Sprintf(" Output up to byte %d of 200000 saved to %s — Grep it", ceiling, res.StdoutInfo.SpillPath), res.StdoutInfo.SpillPath},
		{"stderr", res.Stderr, fmt.Sprintf(" Output after byte %d of 200000 saved to %s — Grep it", 200000-ceiling, res.StderrInfo.SpillPath), res.StderrInfo.SpillPath},
	} {
		if c.path == "" || !strings.Contains(c.view, c.sentence) || strings.Contains(c.view, "Full output") {
			t.Errorf("%s marker: want %q in a view of %d bytes; view has: %q", c.name, c.sentence, len(c.view), markerOf(c.view))
			continue
		}
		if st, err := os.Stat(c.path); err != nil || st.Size() != ceiling {
			t.Errorf("%s spill: %v, want %d bytes", c.name, err, ceiling)
		}
	}
	// Under the ceiling the copy is whole and says so.
	res = run(t, s, Request{Command: `seq 1 5000`, Session: "s1"})
	if !strings.Contains(res.Stdout, "Full output saved to "+res.StdoutInfo.SpillPath) {
		t.Errorf("whole copy marker: %q", markerOf(res.Stdout))
	}
}

// markerOf returns the [truncated: ...] marker in view, or "".
func markerOf(view string) string {
	i := strings.Index(view, "[truncated:")
	if i < 0 {
		return ""
	}
	j := strings.Index(view[i:], "]")
	if j < 0 {
		return view[i:]
	}
	return view[i : i+j+1]
}

// TestTimeoutMilliseconds: a timeout over the maximum that is a multiple of
// 1000 is refused with an error saying seconds, not milliseconds.
func TestTimeoutMilliseconds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sec  float64
		want string
	}{
		{120000, "timeout is in seconds, not milliseconds: 120000 seconds is over the 300 allowed; for 120 s send 120"},
		{301, "timeout must be between 1 and 300 seconds, got 301"}, // not a multiple of 1000
		{1000, "timeout is in seconds, not milliseconds"},
	} {
		_, err := ParseTimeout(c.sec, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseTimeout(%v): %v, want %q", c.sec, err, c.want)
		}
	}
}
