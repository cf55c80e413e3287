//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/supervisor"
)

// fillJournal writes n entries of result round-robin over sessions, plus
// unfinished of them left started (as a killed server leaves them), from
// many writers at once so they share commits.
func fillJournal(tb testing.TB, dir string, sessions []string, n, unfinished int, result json.RawMessage) {
	tb.Helper()
	j, err := journal.Open(dir, journal.Options{MaxEntries: n})
	if err != nil {
		tb.Fatal(err)
	}
	defer j.Close()
	begin := time.Now()
	next := make(chan int, 1024)
	var wg sync.WaitGroup
	for range 256 {
		wg.Go(func() {
			for i := range next {
				st, err := j.Start(sessions[i%len(sessions)], "go test ./...", time.Now())
				if err == nil && i >= unfinished {
					err = j.Finish(st, time.Now(), result, "/home/user/project")
				}
				if err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	tb.Logf("%d entries in %d sessions written in %v", n, len(sessions), time.Since(begin).Round(time.Millisecond))
}

// benchResult is a real Result of a command with a few lines of output.
func benchResult(tb testing.TB) json.RawMessage {
	code := 0
	res := supervisor.Result{ID: "r-0123abcd-1", Stdout: strings.Repeat("ok  \tgithub.com/corral-sh/corral/pkg\t0.123s\n", 12),
		ExitCode: &code, DurationMs: 1234, Kill: supervisor.KillInfo{Tier: "cgroup2"}, Cwd: "/home/user/project"}
	res.StdoutInfo.TotalBytes, res.StdoutInfo.KeptBytes, res.StdoutInfo.TotalLines = 528, 528, 12
	b, err := json.Marshal(res)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkJournalHistoryPage: one session of 100,000 entries (journal
// default retention raised to keep them all); GET
// /v1/sessions/big/results?after=99000&limit=100 through the HTTP API,
// reporting p50 and p99, and the store's bytes per entry against the
// Result's JSON size. Goal: p50 at most 2 ms, bytes per entry about the
// Result's size.
func BenchmarkJournalHistoryPage(b *testing.B) {
	const n = 100000
	dir := b.TempDir()
	res := benchResult(b)
	fillJournal(b, dir, []string{"big"}, n, 0, res)
	j, err := journal.Open(dir, journal.Options{MaxEntries: n})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	sup, err := supervisor.New(supervisor.Config{DataDir: dir, Journal: j})
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	srv, err := api.New(api.Config{Supervisor: sup})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	client := ts.Client()
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		resp, err := client.Get(ts.URL + "/v1/sessions/big/results?after=99000&limit=100")
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(start))
		if err != nil || !bytes.HasSuffix(body, []byte(`],"next":99100}`+"\n")) || bytes.Count(body, []byte(`"command":`)) != 100 {
			b.Fatalf("page of %d bytes: %v", len(body), err)
		}
	}
	slices.Sort(lat)
	fi, _ := os.Stat(j.Path())
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(fi.Size())/n, "store-B/entry")
	b.ReportMetric(float64(len(res)), "result-B")
}

// BenchmarkJournalRestart: `corral serve` started on a data directory whose
// journal holds 1,000 sessions and 100,000 entries (100 of them left
// unfinished, completed at the start), timed from exec to the "serving"
// log line, against the same start on an empty data directory. Goal:
// at most 1 s.
func BenchmarkJournalRestart(b *testing.B) {
	full := b.TempDir()
	sessions := make([]string, 1000)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("s%04d", i)
	}
	fillJournal(b, full, sessions, 100000, 100, benchResult(b))
	// The store's dirty pages reach the disk first: the first start's
	// synced commit (completing the unfinished entries) would otherwise
	// wait behind their writeback.
	syscall.Sync()
	empty := b.TempDir()
	var tFull, tEmpty []time.Duration
	for b.Loop() {
		tFull = append(tFull, timeToServing(b, full))
		tEmpty = append(tEmpty, timeToServing(b, empty))
	}
	slices.Sort(tFull)
	slices.Sort(tEmpty)
	b.ReportMetric(float64(tFull[len(tFull)/2].Milliseconds()), "full-p50-ms")
	b.ReportMetric(float64(tFull[len(tFull)-1].Milliseconds()), "full-max-ms")
	b.ReportMetric(float64(tEmpty[len(tEmpty)/2].Milliseconds()), "empty-p50-ms")
}

// timeToServing starts corral serve on data and returns how long it took
// to log "serving"; the server is stopped with SIGTERM.
func timeToServing(b *testing.B, data string) time.Duration {
	b.Helper()
	cmd := exec.Command(corralBin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data)
	cmd.Env = append(os.Environ(), "CORRAL_TOKEN=bench-token", "CORRAL_CONTAINMENT=")
	logs, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	s := &server{cmd: cmd, logs: make(chan struct{})}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	addr := make(chan string, 1)
	go s.readLogs(logs, addr)
	var took time.Duration
	select {
	case <-addr:
		took = time.Since(begin)
	case <-s.logs:
		cmd.Wait()
		b.Fatal("corral serve exited before serving")
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	<-s.logs
	return took
}
