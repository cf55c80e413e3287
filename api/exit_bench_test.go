package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// stampCommand prints the shell's clock ($EPOCHREALTIME, microseconds) as
// its last act before exiting: the exit follows the builtin echo at once.
const stampCommand = "echo $EPOCHREALTIME"

// sinceStamp is the time from the stamp a command printed (its first line
// of stdout) to now.
func sinceStamp(b *testing.B, stdout string) time.Duration {
	b.Helper()
	f, err := strconv.ParseFloat(strings.TrimSpace(stdout), 64)
	if err != nil {
		b.Fatalf("stamp %q: %v", stdout, err)
	}
	return time.Since(time.UnixMicro(int64(f * 1e6)))
}

// BenchmarkExitToClient measures, one job at a time, the time from a job's
// exit (the stamp its shell prints just before exiting) to a client
// holding the news: the exited line of GET /v1/events (events), and
// notifications/resources/updated of a subscribed go-sdk client over /mcp
// with a session (mcp). The baseline (exec) is the same command through
// POST /v1/exec, stamp to the response: what corral spends from the exit
// to a Result at all (reaping the tree, draining the pipes, the journal
// write), which every notification includes.
func BenchmarkExitToClient(b *testing.B) {
	sup := benchSupervisor(b)
	srv, err := api.New(api.Config{Supervisor: sup})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Shutdown(context.Background())
	ctx := context.Background()
	post := func(path, body string) []byte {
		resp, err := ts.Client().Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %s", path, resp.StatusCode, out)
		}
		return out
	}
	cmd := jsonString(stampCommand)

	b.Run("exec", func(b *testing.B) {
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			var res supervisor.Result
			json.Unmarshal(post("/v1/exec", `{"command":`+cmd+`}`), &res)
			ds = append(ds, sinceStamp(b, res.Stdout))
		}
		reportLatency(b, ds)
	})

	b.Run("events", func(b *testing.B) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		req, _ := http.NewRequestWithContext(cctx, "GET", ts.URL+"/v1/events", nil)
		resp, err := ts.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			post("/v1/jobs", `{"command":`+cmd+`}`)
			for sc.Scan() {
				var ev supervisor.JobEvent
				if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == supervisor.JobEventExited {
					ds = append(ds, sinceStamp(b, ev.Result.Stdout))
					break
				}
			}
		}
		reportLatency(b, ds)
	})

	b.Run("mcp", func(b *testing.B) {
		updated := make(chan time.Time, 1)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { updated <- time.Now() },
		}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: ts.Client(), MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		gate := filepath.Join(b.TempDir(), "gate")
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			// The job stamps only once the gate exists, after the
			// subscription, so the update is that of its exit.
			os.Remove(gate)
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{
				"command": "until [ -e " + gate + " ]; do sleep 0.005; done; " + stampCommand, "background": true}})
			if err != nil || r.IsError {
				b.Fatalf("%v %v", err, r)
			}
			var st supervisor.JobStarted
			raw, _ := json.Marshal(r.StructuredContent)
			json.Unmarshal(raw, &st)
			uri := "corral://jobs/" + st.ID
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				b.Fatal(err)
			}
			os.WriteFile(gate, nil, 0o644)
			at := <-updated
			res, err := sup.Jobs().Wait(ctx, st.ID, 0)
			if err != nil {
				b.Fatal(err)
			}
			f, _ := strconv.ParseFloat(strings.TrimSpace(res.Stdout), 64)
			ds = append(ds, at.Sub(time.UnixMicro(int64(f*1e6))))
			cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
		}
		reportLatency(b, ds)
	})
}
