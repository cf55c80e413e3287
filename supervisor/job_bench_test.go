//go:build linux

package supervisor

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
)

func init() {
	// monolines N: print N lines, each the CLOCK_MONOTONIC time at which it
	// was written (system-wide, so the reader can compare), 1 ms apart.
	proctest.Register("monolines", func(args []string) int {
		n, _ := strconv.Atoi(args[0])
		for range n {
			fmt.Fprintf(os.Stdout, "%d\n", monoNow())
			time.Sleep(time.Millisecond)
		}
		return 0
	})
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// BenchmarkJobOutputLatency measures the time from a job writing a line to
// a long-polling Jobs.Output reader receiving it, over 1,000 lines per
// iteration, and reports p50 and p99 in microseconds.
func BenchmarkJobOutputLatency(b *testing.B) {
	s, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var lat []float64
	for range b.N {
		st, err := s.Jobs().Start(JobRequest{Request: Request{Command: proctest.Command("monolines", "1000")}})
		if err != nil {
			b.Fatal(err)
		}
		after := int64(0)
		for {
			out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, after, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			now := monoNow()
			for _, line := range strings.Split(strings.TrimSuffix(out.Data, "\n"), "\n") {
				if ns, err := strconv.ParseInt(line, 10, 64); err == nil {
					lat = append(lat, float64(now-ns)/1e3)
				}
			}
			after = out.Next
			if out.State == JobExited && out.Data == "" {
				break
			}
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		b.Fatal("no lines read")
	}
	b.ReportMetric(lat[len(lat)/2], "p50-µs")
	b.ReportMetric(lat[len(lat)*99/100], "p99-µs")
	b.ReportMetric(float64(len(lat))/float64(b.N), "lines/op")
}
