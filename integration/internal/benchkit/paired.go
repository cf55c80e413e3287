//go:build linux

package benchkit

import (
	"testing"
	"time"
)

// An Op is one contender's call in a paired benchmark: Run does one whole
// call; Bytes is what it drains (0 when throughput means nothing).
type Op struct {
	Name  string
	Bytes int64
	Run   func() error
}

// Paired runs every op once per iteration, rotating which goes first, so
// that all of them see the same machine however noisy it is, and reports per
// op its mean time ("<name>-µs") and, when Bytes > 0, its throughput
// ("<name>-MB/s", 10^6 bytes per second) and flood size ("<name>-MiB").
func Paired(b *testing.B, ops []Op) {
	total := make([]time.Duration, len(ops))
	i := 0
	for b.Loop() {
		for k := range ops {
			j := (i + k) % len(ops)
			start := time.Now()
			if err := ops[j].Run(); err != nil {
				b.Fatalf("%s: %v", ops[j].Name, err)
			}
			total[j] += time.Since(start)
		}
		i++
	}
	for j, op := range ops {
		mean := total[j] / time.Duration(i)
		b.ReportMetric(float64(mean.Microseconds()), op.Name+"-µs")
		if op.Bytes > 0 {
			b.ReportMetric(float64(op.Bytes)/mean.Seconds()/1e6, op.Name+"-MB/s")
			b.ReportMetric(float64(op.Bytes>>20), op.Name+"-MiB")
		}
	}
}
