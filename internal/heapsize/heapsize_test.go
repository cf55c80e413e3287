package heapsize

import "testing"

// sink makes the test's slices escape, so the runtime (not a stack
// buffer) allocates them.
var sink []byte

// TestOfMatchesRuntime: append to a nil slice allocates through the
// runtime's own rounding (growslice's roundupsize), so the capacity it
// returns is what the allocator took; Of must agree for every small size
// and for large ones around page boundaries.
func TestOfMatchesRuntime(t *testing.T) {
	sizes := []int{}
	for n := 1; n <= maxSmall+1; n++ {
		sizes = append(sizes, n)
	}
	for _, n := range []int{40 << 10, 64<<10 - 1, 64 << 10, 64<<10 + 1, 98400, 512 << 10, 1 << 20} {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		sink = append([]byte(nil), make([]byte, n)...)
		if got, want := Of(n), int64(cap(sink)); got != want {
			t.Fatalf("Of(%d) = %d, the runtime allocates %d", n, got, want)
		}
	}
	if Of(0) != 0 || Of(-1) != 0 {
		t.Errorf("Of(0), Of(-1) = %d, %d, want 0", Of(0), Of(-1))
	}
}
