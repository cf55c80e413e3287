package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
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

// TestEventsWaitingOncePerWait: a wait is one waiting event, however long
// the read is held (the watch confirms a held wait about once a second);
// the next wait, after the program got its input, is another. On
// GET /v1/events for a job on a pipe and on a terminal, and on the NDJSON
// stream of /v1/exec for a terminal command held to its timeout.
func TestEventsWaitingOncePerWait(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waiting is detected on Linux")
	}
	t.Parallel()
	const hold = 2500 * time.Millisecond // past two confirmations of a held wait
	for _, tc := range []struct{ name, tty, enter string }{
		{"pipe", `"interactive": true`, "\n"},
		{"tty", `"tty": {}`, "\r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			resp := e.send(ctx, "GET", "/v1/events", "")
			defer resp.Body.Close()
			evs := make(chan supervisor.JobEvent, 64)
			go func() {
				defer close(evs)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					var ev supervisor.JobEvent
					if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event != "keepalive" {
						evs <- ev
					}
				}
			}()
			st := e.startJob(`{"command": "printf 'first? '; read a; printf 'second? '; read b; echo \"got $a$b\"", ` + tc.tty + `}`)
			// next returns the job's next event, or none after d.
			next := func(d time.Duration) *supervisor.JobEvent {
				timer := time.NewTimer(d)
				defer timer.Stop()
				for {
					select {
					case ev, ok := <-evs:
						if !ok {
							t.Fatal("the event stream ended")
						}
						if ev.JobID == st.ID {
							return &ev
						}
					case <-timer.C:
						return nil
					}
				}
			}
			// On a pipe nothing echoes the answer: the second prompt's
			// line is "first? second?".
			for _, prompt := range []string{"first?", "second?"} {
				ev := next(60 * time.Second)
				if ev == nil || ev.Event != supervisor.JobEventWaiting || ev.Waiting == nil || !strings.HasSuffix(ev.Waiting.Prompt, prompt) {
					t.Fatalf("want the wait at %q, got %+v (waiting %+v)", prompt, ev, ev.Waiting)
				}
				if again := next(hold); again != nil {
					t.Fatalf("while the read at %q was held: another event %+v (waiting %+v)", prompt, *again, again.Waiting)
				}
				if code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin", "x"+tc.enter); code != http.StatusNoContent {
					t.Fatalf("stdin: %d %s", code, b)
				}
			}
			if ev := next(60 * time.Second); ev == nil || ev.Event != supervisor.JobEventExited {
				t.Errorf("after the second answer: %+v, want the exit", ev)
			}
		})
	}
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		resp := e.send(context.Background(), "POST", "/v1/exec", `{"command": "read -p 'held? ' x", "tty": {}, "timeout": 5}`,
			"Accept", "application/x-ndjson")
		defer resp.Body.Close()
		waits := 0
		var res *supervisor.Result
		events(t, resp.Body, func(_ []byte, ev supervisor.Event) bool {
			switch ev.Event {
			case supervisor.EventWaiting:
				waits++
			case supervisor.EventResult:
				res = ev.Result
				return false
			}
			return true
		})
		if waits != 1 || res == nil || !res.TimedOut || res.Waiting == nil || res.Waiting.Prompt != "held?" {
			t.Errorf("%d waiting events over a read held 5 s, want 1; result %+v", waits, res)
		}
	})
}
