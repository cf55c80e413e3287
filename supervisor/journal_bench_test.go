package supervisor

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/journal"
)

// BenchmarkJournalRatio is the journal's cost on `true`: two Supervisors on
// the default tier, one with a journal and one without, alternating in one
// loop, and ratio = mean with / mean without (goal: 1.05). The serial row
// is one caller (every command pays its own two synced commits, the start
// and the Result); the parallel rows run 4 or 8 callers at once, whose
// commits share syncs, and time a round of them. busy-ratio is the same
// for the machine's busy CPU time (/proc/stat: every process's and the
// kernel's, the file system's journal thread among them), which is what
// the parallel rows, CPU-bound on a small machine, pay for.
func BenchmarkJournalRatio(b *testing.B) {
	for _, callers := range []int{1, 4, 8} {
		name := "serial"
		if callers > 1 {
			name = "parallel-" + string(rune('0'+callers))
		}
		b.Run(name, func(b *testing.B) { journalRatio(b, callers) })
	}
}

func journalRatio(b *testing.B, callers int) {
	dir := b.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	plain := newSup(b, Config{})
	journaled := newSup(b, Config{Journal: j})
	var busyPlain, busyJournal int64
	var selfCPU, childCPU [2]time.Duration
	round := func(s *Supervisor) time.Duration {
		busy0 := busyJiffies()
		self0, child0 := cpuTimes()
		defer func() {
			k := 0
			if s == plain {
				busyPlain += busyJiffies() - busy0
			} else {
				k = 1
				busyJournal += busyJiffies() - busy0
			}
			self1, child1 := cpuTimes()
			selfCPU[k] += self1 - self0
			childCPU[k] += child1 - child0
		}()
		start := time.Now()
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				res, err := s.Run(context.Background(), Request{Command: "true", Session: "bench"})
				if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
					b.Errorf("true: %v %+v", err, res)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var tPlain, tJournal []time.Duration
	i := 0
	for b.Loop() {
		for k := range 2 {
			if (i+k)%2 == 0 {
				tPlain = append(tPlain, round(plain))
			} else {
				tJournal = append(tJournal, round(journaled))
			}
		}
		i++
	}
	b.ReportMetric(float64(sum(tJournal))/float64(sum(tPlain)), "ratio")
	b.ReportMetric(float64(median(tJournal))/float64(median(tPlain)), "median-ratio")
	b.ReportMetric(float64(sum(tPlain).Microseconds())/float64(i), "plain-µs/round")
	b.ReportMetric(float64(sum(tJournal).Microseconds())/float64(i), "journal-µs/round")
	b.ReportMetric(float64((selfCPU[1]-selfCPU[0]).Microseconds())/float64(i*callers), "self-extra-cpu-µs/cmd")
	b.ReportMetric(float64((childCPU[1]-childCPU[0]).Microseconds())/float64(i*callers), "children-extra-cpu-µs/cmd")
	b.ReportMetric(float64(busyJournal-busyPlain)*1e4/float64(i*callers), "busy-extra-cpu-µs/cmd")
	if busyPlain > 0 {
		b.ReportMetric(float64(busyJournal)/float64(busyPlain), "busy-ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// busyJiffies is the machine's busy CPU time so far in clock ticks: the
// first line of /proc/stat without idle and iowait; 0 without /proc.
func busyJiffies() int64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	var busy int64
	for i, f := range strings.Fields(line)[1:] {
		if i == 3 || i == 4 || i >= 7 { // idle, iowait; steal, guest (counted in user)
			continue
		}
		n, _ := strconv.ParseInt(f, 10, 64)
		busy += n
	}
	return busy
}
