package heapsize

// maxSmall is the largest allocation served from a size class; a larger
// one takes whole pages (runtime/internal/gc: MaxSmallSize, PageShift).
const (
	maxSmall = 32 << 10
	pageSize = 8 << 10
)

// classes are the allocator's size classes (Go's runtime/internal/gc
// SizeClassToSize, unchanged since Go 1.21); TestOfMatchesRuntime checks
// them against the running runtime.
var classes = [...]int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
	2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880,
	12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// Of returns the bytes the allocator takes for n bytes of pointer-free
// data; 0 for n <= 0.
func Of(n int) int64 {
	switch {
	case n <= 0:
		return 0
	case n > maxSmall:
		return int64((n + pageSize - 1) / pageSize * pageSize)
	}
	lo, hi := 0, len(classes)-1
	for lo < hi { // the smallest class that holds n
		mid := (lo + hi) / 2
		if classes[mid] >= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return int64(classes[lo])
}
