package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-sh/corral/supervisor"
)

// TestEventsExited: GET /v1/events streams an exited event, with the
// Result, for the caller's own job, and nothing for another token's job.
func TestEventsExited(t *testing.T) {
	t.Parallel()
	const other = "other-token"
	e := newEnv(t, withTokens(testToken, other))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := e.send(ctx, "GET", "/v1/events", "")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Another tenant's job first: its event must not reach this stream.
	if code, body := e.do(context.Background(), "POST", "/v1/jobs", `{"command": "exit 7"}`, "Authorization", "Bearer "+other); code != http.StatusOK {
		t.Fatalf("other start: %d %s", code, body)
	}
	code, body := e.do(context.Background(), "POST", "/v1/jobs", `{"command": "exit 3"}`)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	var st supervisor.JobStarted
	json.Unmarshal(body, &st)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev supervisor.JobEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if ev.Event == "keepalive" {
			continue
		}
		if ev.Event != supervisor.JobEventExited || ev.JobID != st.ID || ev.Result == nil || ev.Result.ExitCode == nil || *ev.Result.ExitCode != 3 {
			t.Fatalf("event %s, want the exit of %s", sc.Text(), st.ID)
		}
		if !strings.Contains(sc.Text(), `"at":"`) {
			t.Errorf("no at in %s", sc.Text())
		}
		return
	}
	t.Fatalf("stream ended: %v", sc.Err())
}
