//go:build linux

package integration

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestMemoryUnderChurn: a server with the default caps (64 MiB of the
// jobs' memory) runs 1,000 background jobs of 1 MB output, 30 at a time,
// while the test samples its own memory (RssAnon: the journal's mapped
// file is RssFile) every 20 ms. The baseline is the server idle after 60
// jobs of `true`, 30 at a time (the threads and connections 30 jobs at once
// cost are in it). The soft memory limit corral serve sets from its caps
// (docs/memory.md) makes the Go heap collect before it doubles, and the
// byte cap counts the running jobs' captures with the exited jobs', each
// time a job exits and each time a running job's buffers grow: the peak
// must stay within the baseline + the cap + 32 MiB (the limit's 24 MiB of
// room and 8 MiB for the runtime passing its soft limit) + 12 MiB of
// margin for a loaded machine, where the collector gets less of the CPU
// (docs/memory.md has the figures). Without the limit the peak was
// +207 MiB; with it but the running jobs outside the cap, +107 to +111 MiB.
func TestMemoryUnderChurn(t *testing.T) {
	proctest.Heavy(t)
	m := marker(t)
	s := startServer(t)
	defer func() { checkGone(t, m) }()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 30}, Timeout: 300 * time.Second}
	defer client.CloseIdleConnections()
	jobs := func(n int, command string) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 30)
		for i := range n {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := runServerJob(s, client, command, m); err != nil {
					t.Errorf("job %d (%s): %v", i, command, err)
				}
			})
		}
		wg.Wait()
	}
	jobs(60, "true")
	time.Sleep(3 * time.Second) // idle: the server returns its free memory
	base := s.usage(t)

	stop, sampled := make(chan struct{}), make(chan serverUsage)
	go func() {
		peak := base
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sampled <- peak
				return
			case <-tick.C:
				if u := s.usage(t); u.anonKB > peak.anonKB {
					peak = u
				}
			}
		}
	}()
	begin := time.Now()
	jobs(1000, "head -c 1000000 /dev/zero | tr '\\0' x")
	took := time.Since(begin)
	close(stop)
	peak := <-sampled
	const allowed = (64 + 32 + 12) << 10 // KiB
	t.Logf("FIGURE 1,000 jobs of 1 MB, 30 at a time, in %v: RssAnon %d KiB at the baseline, peak +%d KiB (RSS +%d KiB); allowed +%d KiB",
		took.Round(time.Millisecond), base.anonKB, peak.anonKB-base.anonKB, peak.rssKB-base.rssKB, allowed)
	if peak.anonKB > base.anonKB+allowed {
		t.Errorf("RssAnon peaked at %d KiB, more than the baseline %d KiB + %d KiB", peak.anonKB, base.anonKB, allowed)
	}
}

// TestServeMemoryLimit: corral serve runs under the soft memory limit its
// caps give (its Go memory at start + --max-retained-bytes + 24 MiB, here
// no container limit below it), and /metrics shows it.
func TestServeMemoryLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--max-retained-bytes", "16MiB")
	v, ok := s.metric(t, "corral_memory_limit_bytes")
	if !ok {
		t.Fatal("no corral_memory_limit_bytes in /metrics")
	}
	if lo, hi := float64((16+24)<<20), float64((16+24+64)<<20); v < lo || v > hi {
		t.Fatalf("corral_memory_limit_bytes %.0f, want between %.0f and %.0f", v, lo, hi)
	}
}
