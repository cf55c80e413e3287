package journal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkStartFinish is one entry's two synced commits, as a lone writer.
func BenchmarkStartFinish(b *testing.B) {
	j, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	res := json.RawMessage(`{"stdout":"","stderr":"","exitCode":0}`)
	for b.Loop() {
		st, err := j.Start("s", "true", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Finish(st, time.Now(), res, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// fill writes n entries of result into session, from 256 writers at once
// so that they share commits.
func fill(tb testing.TB, j *Journal, sessions []string, n int, result json.RawMessage) {
	tb.Helper()
	var wg sync.WaitGroup
	next := make(chan string, 1024)
	for range 256 {
		wg.Go(func() {
			for s := range next {
				st, err := j.Start(s, "make test", time.Now())
				if err == nil {
					err = j.Finish(st, time.Now(), result, "")
				}
				if err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	for i := range n {
		next <- sessions[i%len(sessions)]
	}
	close(next)
	wg.Wait()
}

// sampleResult is a Result of about 1 KiB, as a command with a few lines of
// output returns it.
func sampleResult() json.RawMessage {
	out := strings.Repeat("ok  \tgithub.com/corral-sh/corral/pkg\t0.123s\n", 12)
	return json.RawMessage(`{"id":"r-0123abcd-1","stdout":` + strconv.Quote(out) + `,"stderr":"","exitCode":0,"signal":"","timedOut":false,"aborted":false,"durationMs":1234,"truncated":false,` +
		`"stdoutInfo":{"truncated":false,"totalBytes":528,"totalLines":12,"keptBytes":528,"keptLines":12,"capturedBytes":528,"omittedBytes":0,"omittedLines":0,"spillPath":""},` +
		`"stderrInfo":{"truncated":false,"totalBytes":0,"totalLines":0,"keptBytes":0,"keptLines":0,"capturedBytes":0,"omittedBytes":0,"omittedLines":0,"spillPath":""},` +
		`"kill":{"tier":"cgroup2","processes":0,"lingering":0},"cwd":"/home/user/project"}`)
}

// BenchmarkHistory100k: one session of 100,000 entries (BENCH_ENTRIES to
// change it); times List(after=n-1000, limit=100) and reports the store's
// bytes per entry against the Result's JSON size.
func BenchmarkHistory100k(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("BENCH_ENTRIES")); err == nil {
		n = v
	}
	dir := b.TempDir()
	j, err := Open(dir, Options{MaxEntries: n})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	res := sampleResult()
	begin := time.Now()
	fill(b, j, []string{"big"}, n, res)
	b.Logf("%d entries written in %v", n, time.Since(begin))
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		list, _, err := j.List("big", uint64(n-1000), 100)
		lat = append(lat, time.Since(start))
		if err != nil || len(list) != 100 {
			b.Fatalf("%d entries, %v", len(list), err)
		}
	}
	slices.Sort(lat)
	fi, _ := os.Stat(j.Path())
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(fi.Size())/float64(n), "store-B/entry")
	b.ReportMetric(float64(len(res)), "result-B")
}

// bigStore writes a store of 1,000 sessions and 100,000 entries of about
// 1 KiB (BENCH_ENTRIES to change the count), the restart budget's size,
// and returns its data directory.
func bigStore(b *testing.B) string {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("BENCH_ENTRIES")); err == nil {
		n = v
	}
	dir := b.TempDir()
	j, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	sessions := make([]string, 1000)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("session-%d", i)
	}
	fill(b, j, sessions, n, sampleResult())
	j.Close()
	return dir
}

// BenchmarkOpen100k: Open (with its check of the whole file, verify) and
// Close of bigStore's store; the wall time (BenchmarkVerify100k reports
// the check's CPU time).
func BenchmarkOpen100k(b *testing.B) {
	dir := bigStore(b)
	for b.Loop() {
		j, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		j.Close()
	}
	fi, _ := os.Stat(filepath.Join(dir, "journal", FileName))
	b.ReportMetric(float64(fi.Size())/(1<<20), "store-MiB")
}
