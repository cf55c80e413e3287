package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestMemoryLimitOf(t *testing.T) {
	t.Parallel()
	const mi = 1 << 20
	unset := debug.SetMemoryLimit(-1)
	for _, tc := range []struct {
		name                      string
		base, retained, container int64
		env                       bool
		want                      int64
		source                    string
	}{
		// No container limit: the base, the retention cap and the room.
		{"caps", 8 * mi, 64 * mi, 0, false, 96 * mi, "caps"},
		// A container roomier than the caps.
		{"roomy container", 8 * mi, 64 * mi, 1 << 30, false, 96 * mi, "caps"},
		// A tight container: 90 % of its memory.max.
		{"tight container", 8 * mi, 64 * mi, 100 * mi, false, 90 * mi, "container"},
		// GOMEMLIMIT is the operator's: left as the runtime read it.
		{"env", 8 * mi, 64 * mi, 100 * mi, true, unset, "GOMEMLIMIT"},
	} {
		l := memoryLimitOf(tc.base, tc.retained, tc.container, tc.env)
		if l.bytes != tc.want || l.source != tc.source {
			t.Errorf("%s: %d (%s), want %d (%s)", tc.name, l.bytes, l.source, tc.want, tc.source)
		}
	}
	if unset != math.MaxInt64 {
		t.Logf("this test process runs under a memory limit of %d", unset)
	}
}
