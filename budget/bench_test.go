package budget

import (
	"fmt"
	"strings"
	"testing"
)

// capture512K returns 512 KiB of realistic build-log lines: paths, numbers,
// some UTF-8, an occasional coloured word.
func capture512K() []byte {
	var b strings.Builder
	for i := 0; b.Len() < 512<<10; i++ {
		switch i % 10 {
		case 0:
			fmt.Fprintf(&b, "\x1b[32mok\x1b[0m  github.com/corral-sh/corral/pkg%d\t%d.%03ds\n", i, i%7, i%1000)
		case 5:
			fmt.Fprintf(&b, "warning: ünüsed variable `x%d` in src/module_%d/file.go:%d:%d — consider removing it\n", i, i%50, i%400, i%80)
		default:
			fmt.Fprintf(&b, "[%06d] compiling src/module_%d/file_%d.go (%d bytes)\n", i, i%50, i, i*37%100000)
		}
	}
	return []byte(b.String()[:512<<10])
}

func BenchmarkShapeFull512K(b *testing.B) {
	data := capture512K()
	c := Counts{TotalBytes: 40 << 20, TotalLines: 600000, CapturedBytes: int64(len(data)), CapturedLines: countLines(data), OmittedBytes: 40<<20 - int64(len(data)), OmittedLines: 600000 - countLines(data)}
	for _, p := range []Policy{PolicyHead, PolicyTail, PolicyHeadTail} {
		b.Run(string(p), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				view, _ := Shape(data, c, Options{Policy: p, SpillPath: "/s/x.log"})
				if len(view) < 90<<10 {
					b.Fatalf("short view: %d bytes", len(view))
				}
			}
		})
	}
	// Baseline in the same run: copying the 96 KiB a view holds.
	b.Run("baseline-copy96K", func(b *testing.B) {
		dst := make([]byte, DefaultMaxBytes)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			copy(dst, data)
			_ = string(dst)
		}
	})
}
