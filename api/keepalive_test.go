package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// TestNDJSONKeepalive: a silent command's stream carries a keepalive line
// after each heartbeat of silence, {"event":"keepalive"} exactly, and none
// after the result.
func TestNDJSONKeepalive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withHeartbeat(100*time.Millisecond))
	resp := e.streamExec(context.Background(), `{"command":"echo a; sleep 1; echo b"}`)
	defer resp.Body.Close()
	var kinds []string
	events(t, resp.Body, func(line []byte, ev supervisor.Event) bool {
		if ev.Event == api.EventKeepalive && string(line) != `{"event":"keepalive"}` {
			t.Errorf("keepalive line %s", line)
		}
		if len(kinds) > 0 && kinds[len(kinds)-1] == supervisor.EventResult {
			t.Errorf("%s after the result", line)
		}
		kinds = append(kinds, ev.Event)
		return true
	})
	got := strings.Join(kinds, " ")
	// start, output a, keepalives through the second of silence (about ten;
	// a loaded machine may also send one before a), output b, result.
	var rest []string
	between := 0
	for _, k := range kinds {
		if k == api.EventKeepalive {
			if len(rest) == 2 {
				between++
			}
			continue
		}
		rest = append(rest, k)
	}
	if strings.Join(rest, " ") != "start output output result" || between < 3 || between > 12 {
		t.Errorf("events %q: want start, output, keepalives (3 to 12 in the silence, got %d), output, result", got, between)
	}
}

// TestDisconnectSkipsGrace: a client that goes away gets its command's
// tree SIGKILLed at once, even one that ignores SIGTERM under a 2 s grace;
// docs/wire.md promises it is gone within a second.
func TestDisconnectSkipsGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withGrace(supervisor.DefaultGrace))
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "ndjson", false: "blocking"}[stream]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, marker := proctest.Marker(t)
			body := `{"command":` + jsonString(marked(marker, "trap '' TERM; sleep 60 & echo ready; sleep 60")) + `}`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if stream {
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
