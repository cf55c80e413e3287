package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// streamExec posts body for NDJSON and returns the open response.
func (e *env) streamExec(ctx context.Context, body string) *http.Response {
	e.t.Helper()
	resp := e.send(ctx, "POST", "/v1/exec", body, "Accept", api.NDJSONType)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.NDJSONType {
		resp.Body.Close()
		e.t.Fatalf("stream: status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// waitStart reads events until the start event and returns its pid.
func waitStart(t *testing.T, resp *http.Response) int {
	t.Helper()
	pid := 0
	events(t, resp.Body, func(_ []byte, ev supervisor.Event) bool {
		if ev.Event != supervisor.EventStart {
			t.Fatalf("first event %+v, want start", ev)
		}
		pid = ev.Pid
		return false
	})
	if pid <= 0 {
		t.Fatal("no start event")
	}
	return pid
}

// waitOutput reads events until an output event whose data is want.
func waitOutput(t *testing.T, resp *http.Response, want string) {
	t.Helper()
	found := false
	events(t, resp.Body, func(_ []byte, ev supervisor.Event) bool {
		found = ev.Event == supervisor.EventOutput && ev.Data == want
		return !found
	})
	if !found {
		t.Fatalf("stream ended without output %q", want)
	}
}

func TestNDJSONFlood(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp := e.streamExec(context.Background(),
		`{"command":"yes out | head -c 5000000 & yes err | head -c 5000000 >&2; wait"}`)
	defer resp.Body.Close()
	seq := map[supervisor.Stream]int64{}
	live := map[supervisor.Stream]int{}
	capped := map[supervisor.Stream]bool{}
	var last supervisor.Event
	n := 0
	events(t, resp.Body, func(line []byte, ev supervisor.Event) bool {
		if last.Event == supervisor.EventResult {
			t.Fatalf("event after the result: %s", line)
		}
		n++
		switch ev.Event {
		case supervisor.EventStart:
			if n != 1 {
				t.Errorf("start is event %d", n)
			}
		case supervisor.EventOutput, supervisor.EventCapped:
			if capped[ev.Stream] {
				t.Errorf("%s event after capped: %s", ev.Stream, line)
			}
			if ev.Seq != seq[ev.Stream]+1 {
				t.Errorf("%s seq %d after %d", ev.Stream, ev.Seq, seq[ev.Stream])
			}
			seq[ev.Stream] = ev.Seq
			live[ev.Stream] += len(ev.Data)
			capped[ev.Stream] = ev.Event == supervisor.EventCapped
		case supervisor.EventResult:
			if ev.Result == nil {
				t.Fatal("result event without result")
			}
		default:
			t.Errorf("unknown event %s", line)
		}
		last = ev
		return true
	})
	if last.Event != supervisor.EventResult {
		t.Fatalf("last event %+v, want result", last)
	}
	res := last.Result
	if res.StdoutInfo.TotalBytes != 5000000 || res.StderrInfo.TotalBytes != 5000000 || !res.Truncated {
		t.Errorf("result counters %+v / %+v", res.StdoutInfo, res.StderrInfo)
	}
	for _, s := range []supervisor.Stream{supervisor.Stdout, supervisor.Stderr} {
		if !capped[s] || live[s] > supervisor.DefaultLiveCap {
			t.Errorf("%s: capped %v after %d live bytes, want capped within %d", s, capped[s], live[s], supervisor.DefaultLiveCap)
		}
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withMaxConcurrent(2))
	_, marker := proctest.Marker(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"command":` + jsonString(marked(marker, "sleep 60")) + `}`
	for range 2 {
		resp := e.streamExec(ctx, body)
		defer resp.Body.Close()
		waitStart(t, resp)
	}
	begin := time.Now()
	resp := e.send(context.Background(), "POST", "/v1/exec", `{"command":"true"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || errorCode(t, b) != api.CodeResourceExhausted {
		t.Errorf("third command: %d %s, want 429 RESOURCE_EXHAUSTED", resp.StatusCode, b)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("third command: Retry-After %q, want 1", ra)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("the refusal took %v; it must not wait for a slot", d)
	}
	cancel()
	proctest.NoSurvivors(t, marker, time.Second)
}

func TestClientDisconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name   string
		stream bool
	}{
		{"ndjson", true},    // cancelled after the start event
		{"blocking", false}, // cancelled while waiting for the Result
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, marker := proctest.Marker(t)
			// A tree of two sleeps at least (bash may exec the last one).
			body := `{"command":` + jsonString(marked(marker, "sleep 60 & echo ready; sleep 60")) + `}`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.stream {
				resp := e.streamExec(ctx, body)
				defer resp.Body.Close()
				waitOutput(t, resp, "ready\n")
			} else {
				done := make(chan struct{})
				go func() {
					defer close(done)
					req, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/exec", strings.NewReader(body))
					if resp, err := e.client.Do(req); err == nil {
						resp.Body.Close()
						t.Errorf("the request returned %d before it was cancelled", resp.StatusCode)
					}
				}()
				defer func() { cancel(); <-done }()
			}
			waitFor(t, 30*time.Second, func() bool { return len(proctest.Survivors(marker)) >= 2 })
			cancel()
			proctest.NoSurvivors(t, marker, time.Second)
		})
	}
}

func TestShutdownAborts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	resp := e.streamExec(context.Background(), `{"command":`+jsonString(marked(marker, "sleep 60 & echo ready; wait"))+`}`)
	defer resp.Body.Close()
	waitOutput(t, resp, "ready\n")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	proctest.NoSurvivors(t, marker, time.Second)
	var last supervisor.Event
	events(t, resp.Body, func(_ []byte, ev supervisor.Event) bool { last = ev; return true })
	if last.Result == nil || !last.Result.Aborted {
		t.Errorf("last event %+v, want an aborted result", last)
	}
	resp = e.send(context.Background(), "POST", "/v1/exec", `{"command":"true"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, b) != api.CodeUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("exec after Shutdown: %d Retry-After %q %s, want 503 UNAVAILABLE with Retry-After (docs/wire.md: shutting down)",
			resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}

// waitFor polls cond every 10 ms until it holds or d has passed.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
