package supervisor

import (
	"context"
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
// commits share syncs, and time a round of them.
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
	round := func(s *Supervisor) time.Duration {
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
}
