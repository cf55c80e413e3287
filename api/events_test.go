package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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

// TestEventsWaiting: an interactive job that blocks reading its stdin is
// announced on its owner's /v1/events stream as a waiting event, with the
// prompt it printed; answering it lets it exit, and the exit follows.
func TestEventsWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := e.send(ctx, "GET", "/v1/events", "")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	code, body := e.do(context.Background(), "POST", "/v1/jobs", `{"command": "printf 'name? '; read x; echo got $x", "interactive": true}`)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	var st supervisor.JobStarted
	json.Unmarshal(body, &st)
	sc := bufio.NewScanner(resp.Body)
	var sawWait bool
	for sc.Scan() {
		var ev supervisor.JobEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch {
		case ev.Event == "keepalive":
		case ev.Event == supervisor.JobEventWaiting && ev.JobID == st.ID && !sawWait:
			if ev.Waiting == nil || ev.Waiting.Prompt != "name?" {
				t.Fatalf("waiting event without the prompt: %s", sc.Text())
			}
			sawWait = true
			if code, body := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin?close=true", "corral\n"); code != http.StatusNoContent {
				_, info := e.do(context.Background(), "GET", "/v1/jobs/"+st.ID, "")
				t.Fatalf("stdin: %d %s; the job: %s", code, body, info)
			}
		case ev.Event == supervisor.JobEventExited && ev.JobID == st.ID:
			if !sawWait {
				t.Fatalf("exit before any waiting event: %s", sc.Text())
			}
			return
		default:
			t.Fatalf("unexpected event %s", sc.Text())
		}
	}
	t.Fatalf("stream ended: %v", sc.Err())
}
