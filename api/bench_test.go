package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// benchSupervisor is the supervisor both benchmarks use, so the HTTP round
// trip and the library call pay for the same containment.
func benchSupervisor(b *testing.B) *supervisor.Supervisor {
	b.Helper()
	sup, err := supervisor.New(supervisor.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sup.Close() })
	return sup
}

// reportLatency reports the p50 and p99 of ds.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*99/100)].Microseconds())/1000, "p99-ms")
}

// BenchmarkLibraryRun is the baseline: supervisor.Run of `true`, serially
// and from 8 goroutines.
func BenchmarkLibraryRun(b *testing.B) {
	sup := benchSupervisor(b)
	req := supervisor.Request{Command: "true"}
	b.Run("serial", func(b *testing.B) {
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			begin := time.Now()
			if _, err := sup.Run(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(begin))
		}
		reportLatency(b, ds)
	})
	b.Run("8-clients", func(b *testing.B) {
		parallel(b, func() error {
			_, err := sup.Run(context.Background(), req)
			return err
		})
	})
}

// BenchmarkExecRoundTrip is POST /v1/exec of `true` over loopback HTTP,
// serially (p50/p99) and from 8 concurrent clients (throughput).
func BenchmarkExecRoundTrip(b *testing.B) {
	srv, err := api.New(api.Config{Supervisor: benchSupervisor(b)})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	exec := func() error {
		resp, err := client.Post(ts.URL+"/v1/exec", "application/json", strings.NewReader(`{"command":"true"}`))
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return err
	}
	b.Run("serial", func(b *testing.B) {
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			begin := time.Now()
			if err := exec(); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(begin))
		}
		reportLatency(b, ds)
	})
	b.Run("8-clients", func(b *testing.B) { parallel(b, exec) })
}

// parallel runs fn b.N times from 8 goroutines and reports runs per second.
func parallel(b *testing.B, fn func() error) {
	var mu sync.Mutex
	var firstErr error
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if err := fn(); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	begin := time.Now()
	for b.Loop() {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "runs/s")
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}
