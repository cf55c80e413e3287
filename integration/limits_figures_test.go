//go:build linux

package integration

import (
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
)

// figuresEnv turns on the measurements behind the server limits of docs/performance.md
// figures; they take about a minute and open 10,000 connections.
const figuresEnv = "CORRAL_LOAD_FIGURES"

func needFigures(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv(figuresEnv) == "" {
		t.Skipf("set %s=1 to measure the server limits figures", figuresEnv)
	}
}

// TestFigureRetainedJobsRSS: a server with the default retention caps (256
// exited jobs, 64 MiB of their memory) runs 1,000 background jobs of 1 MB
// output each, 8 at a time. What the exited jobs keep is capped (the heap
// test of the cap is supervisor's TestJobRetainedMemory). While jobs run,
// the RSS also holds the Go runtime's headroom (the heap may reach twice the
// live data before a collection); a second after the last command ended the
// server returns its free memory (Config.ReturnIdleMemory). The baseline is
// the server's RSS once it has served 16 jobs of `true`, 8 at a time, and
// gone idle: what running 8 jobs at once costs by itself (the runtime's
// threads, which it never ends, its connections) is in it, and the output
// those jobs keep is a few bytes. So the RSS must level off (no more after
// 1,000 jobs than after 500, within 10%), and 5 s after the last job its own
// memory (RssAnon) must be within the baseline's plus the cap. The journal's
// database is a memory-mapped file (bbolt): the pages of it the server
// touched count in VmRSS as RssFile, page cache the kernel can drop; the
// figure reports them apart. With CORRAL_FIGURES_GOMEMLIMIT the server runs
// under that GOMEMLIMIT.
func TestFigureRetainedJobsRSS(t *testing.T) {
	needFigures(t)
	m := marker(t)
	if v := os.Getenv("CORRAL_FIGURES_GOMEMLIMIT"); v != "" {
		t.Setenv("GOMEMLIMIT", v)
	}
	s := startServer(t)
	defer func() { checkGone(t, m) }()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}, Timeout: 120 * time.Second}
	defer client.CloseIdleConnections()
	const command = "head -c 1000000 /dev/zero | tr '\\0' x"
	cold := s.usage(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 16 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := runServerJob(s, client, "true", m); err != nil {
				t.Errorf("warm-up job %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	time.Sleep(3 * time.Second) // idle: the server returns its free memory
	base := s.usage(t)
	begin := time.Now()
	var half serverUsage
	for batch := range 2 {
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i := range 500 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := runServerJob(s, client, command, m); err != nil {
					t.Errorf("job %d: %v", batch*500+i, err)
				}
			})
		}
		wg.Wait()
		if batch == 0 {
			half = s.usage(t)
		}
	}
	took := time.Since(begin)
	end := s.usage(t)
	time.Sleep(5 * time.Second)
	settled := s.usage(t)
	const retainCap = 64 << 10 // KiB
	t.Logf("FIGURE 1,000 jobs of 1 MB in %v (GOMEMLIMIT %q): RSS %d KiB cold, %d KiB at the baseline, +%d KiB after 500 jobs, +%d KiB after 1,000, +%d KiB 5 s later; the cap is %d KiB",
		took.Round(time.Millisecond), os.Getenv("GOMEMLIMIT"), cold.rssKB, base.rssKB, half.rssKB-base.rssKB, end.rssKB-base.rssKB, settled.rssKB-base.rssKB, retainCap)
	if end.rssKB > half.rssKB+half.rssKB/10 {
		t.Errorf("RSS grew from %d KiB after 500 jobs to %d KiB after 1,000: the exited jobs are not bounded", half.rssKB, end.rssKB)
	}
	if end.rssKB > base.rssKB+3*retainCap {
		t.Errorf("RSS %d KiB after 1,000 jobs, more than the baseline %d KiB + 3 × the %d KiB retention cap", end.rssKB, base.rssKB, retainCap)
	}
	t.Logf("FIGURE own memory (RssAnon) %d KiB at the baseline, +%d KiB 5 s after the last job; mapped files (RssFile, the journal) %d KiB then %d KiB",
		base.anonKB, settled.anonKB-base.anonKB, base.fileKB, settled.fileKB)
	if settled.anonKB > base.anonKB+retainCap {
		t.Errorf("RssAnon %d KiB 5 s after the last job, more than the baseline %d KiB + the %d KiB retention cap",
			settled.anonKB, base.anonKB, retainCap)
	}
}

// TestFigureIdleFlood: 10,000 idle connections without the token, opened
// at once against a server with the default limits (1,024 connections)
// and held: the server's descriptors are back at their baseline within the
// header timeout (10 s: a connection that sends nothing is closed then) of
// the flood's opening, while the client still holds them all; an
// authenticated exec during the flood answers within twice its quiet
// median. Then the same flood, dropped by the client at once.
func TestFigureIdleFlood(t *testing.T) {
	needFigures(t)
	s := startServer(t)
	p := newProbe(s)
	defer p.client.CloseIdleConnections()
	for range 40 {
		p.once()
	}
	quietLat, fails := p.take()
	if len(fails) > 0 {
		t.Fatalf("probe before the flood: %v", fails)
	}
	quiet := percentile(quietLat, 0.5)
	time.Sleep(500 * time.Millisecond)
	base := s.usage(t)

	stop := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for {
			select {
			case <-stop:
				return
			default:
			}
			p.once()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	begin := time.Now()
	conns, failed := dialMany(s.addr(), 10000)
	opened := time.Since(begin)
	peak := s.usage(t)
	// Until the server closed what it held: the client holds everything.
	var back time.Duration
	for {
		u := s.usage(t)
		if u.fds <= base.fds {
			back = time.Since(begin)
			break
		}
		if time.Since(begin) > api.HeaderTimeout+10*time.Second {
			t.Errorf("server still holds %d descriptors (baseline %d) %v after the flood began", u.fds, base.fds, time.Since(begin))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-probed
	closeAll(conns)
	floodLat, fails := p.take()
	during := percentile(floodLat, 0.5)
	t.Logf("FIGURE idle flood: %d connections opened in %v (%d failed to connect); server %v at the baseline, %v right after; back to %d descriptors %v after the flood began (header timeout %v)",
		len(conns), opened.Round(time.Millisecond), failed, base, peak, base.fds, back.Round(time.Millisecond), api.HeaderTimeout)
	t.Logf("FIGURE exec `echo ok`: quiet p50 %v (n=%d); during the flood p50 %v, p90 %v, max %v (n=%d, %d failed)",
		quiet.Round(time.Microsecond), len(quietLat), during.Round(time.Microsecond), percentile(floodLat, 0.9).Round(time.Microsecond),
		percentile(floodLat, 1).Round(time.Microsecond), len(floodLat), len(fails))
	for i, f := range fails {
		if i < 5 {
			t.Errorf("exec during the flood: %s", f)
		}
	}
	// Each held connection is closed a header timeout after it was
	// accepted, and every one was accepted by the time the flood was open.
	if back == 0 || back > opened+api.HeaderTimeout+2*time.Second {
		t.Errorf("descriptors back at the baseline after %v, want within the %v header timeout (+2 s) of the flood's %v opening",
			back, api.HeaderTimeout, opened)
	}
	if during > 2*quiet {
		t.Errorf("exec p50 during the flood %v, more than twice the quiet p50 %v", during, quiet)
	}

	// The same flood dropped by the client at once: the server lets go as
	// soon as it reads the end of each connection.
	begin = time.Now()
	conns, failed = dialMany(s.addr(), 10000)
	closeAll(conns)
	dropped := time.Since(begin)
	back = 0
	for back == 0 && time.Since(begin) < api.HeaderTimeout {
		if s.usage(t).fds <= base.fds {
			back = time.Since(begin)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("FIGURE idle flood dropped: %d connections opened and closed in %v (%d failed); server back to %d descriptors %v after the flood began",
		len(conns), dropped.Round(time.Millisecond), failed, base.fds, back.Round(time.Millisecond))
	if back == 0 {
		t.Errorf("descriptors not back at the baseline %v after a dropped flood", api.HeaderTimeout)
	}
}
