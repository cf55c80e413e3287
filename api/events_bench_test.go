package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// BenchmarkEventLatency measures the time from a job's exit being
// published (JobEvent.At, once its Result is made) to the exited line
// reaching a GET /v1/events client, one job at a time.
func BenchmarkEventLatency(b *testing.B) {
	sup := benchSupervisor(b)
	srv, err := api.New(api.Config{Supervisor: sup})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Shutdown(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/events", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	ds := make([]time.Duration, 0, b.N)
	for b.Loop() {
		if _, err := sup.Jobs().Start(supervisor.JobRequest{Request: supervisor.Request{Command: "true", Owner: "http"}}); err != nil {
			b.Fatal(err)
		}
		for sc.Scan() {
			var ev supervisor.JobEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == supervisor.JobEventExited {
				ds = append(ds, time.Since(ev.At))
				break
			}
		}
	}
	reportLatency(b, ds)
}
