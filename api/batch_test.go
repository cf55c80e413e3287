package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

func TestBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, b := e.do(context.Background(), "POST", "/v1/batch",
		`{"session":"s1","requests":[{"command":"echo one"},{"command":"echo two >&2; exit 2","session":"s1"}],"concurrency":2,"budget":4096}`)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	// The response holds exactly DESIGN's keys.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "session", "results", "view", "truncated", "keptResults", "viewBytes", "totalBytes"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("no %q in %s", k, b)
		}
		delete(keys, k)
	}
	if len(keys) != 0 {
		t.Errorf("unexpected keys %v", keys)
	}
	var res supervisor.BatchResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.ID, "b-") || res.Session != "s1" || len(res.Results) != 2 || res.Truncated || res.KeptResults != 2 {
		t.Fatalf("batch %s", b)
	}
	if r := res.Results[1]; r.Stderr != "two\n" || r.ExitCode == nil || *r.ExitCode != 2 {
		t.Errorf("results[1] %+v", r)
	}
	if !strings.HasPrefix(res.View, "[1/2] $ echo one\none\n[exit code 0 after ") ||
		!strings.Contains(res.View, "\n[2/2] $ echo two >&2; exit 2\n[stderr]\ntwo\n[exit code 2 after ") {
		t.Errorf("view %q", res.View)
	}
}

func TestBatchInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one := `{"command":"touch ` + e.data + `/ran"}`
	reqs := func(n int) string { return strings.TrimSuffix(strings.Repeat(one+",", n), ",") }
	tests := []struct {
		name, body, want string
	}{
		{"zero requests", `{"requests":[]}`, "a batch holds 1 to 32 requests, got 0"},
		{"no requests key", `{}`, "a batch holds 1 to 32 requests, got 0"},
		{"33 requests", `{"requests":[` + reqs(33) + `]}`, "a batch holds 1 to 32 requests, got 33"},
		{"budget under 4 KiB", `{"requests":[` + one + `],"budget":4095}`, "budget must be between 4096 (4 KiB) and 16777216 (16 MiB) bytes, got 4095"},
		{"budget 0", `{"requests":[` + one + `],"budget":0}`, "budget must be between 4096 (4 KiB) and 16777216 (16 MiB) bytes, got 0"},
		{"budget over 16 MiB", `{"requests":[` + one + `],"budget":16777217}`, "budget must be between 4096 (4 KiB) and 16777216 (16 MiB) bytes, got 16777217"},
		{"concurrency 0", `{"requests":[` + one + `],"concurrency":0}`, "concurrency must be between 1 and 32, got 0"},
		{"concurrency 33", `{"requests":[` + one + `],"concurrency":33}`, "concurrency must be between 1 and 32, got 33"},
		{"negative concurrency", `{"requests":[` + one + `],"concurrency":-1}`, "concurrency must be between 1 and 32, got -1"},
		{"bad timeout", `{"requests":[` + one + `,{"command":"true","timeout":301}]}`, "requests[1]: timeout must be between 1 and 300 seconds, got 301"},
		{"bad yield", `{"requests":[{"command":"true","yield":-1}]}`, "requests[0]: yield must be between 0 and 21600 seconds, got -1"},
		{"empty command", `{"requests":[` + one + `,` + one + `,{"command":""}]}`, "requests[2]: command is empty"},
		{"unknown key", `{"requests":[{"command":"true","cmd":"x"}]}`, "cmd"},
		{"duplicate key", `{"requests":[` + one + `],"budget":5000,"budget":6000}`, "budget"},
		{"other session", `{"session":"a","requests":[{"command":"true","session":"b"}]}`, `requests[0]: session "b" differs from the batch's session "a"`},
		{"bad session", `{"session":"../x","requests":[` + one + `]}`, `session "../x"`},
	}
	for _, tt := range tests {
		code, b := e.do(context.Background(), "POST", "/v1/batch", tt.body)
		var eb api.ErrorBody
		json.Unmarshal(b, &eb)
		if code != http.StatusBadRequest || errorCode(t, b) != api.CodeInvalidArgument || !strings.Contains(eb.Error.Message, tt.want) {
			t.Errorf("%s: status %d %s, want 400 INVALID_ARGUMENT with %q", tt.name, code, b, tt.want)
		}
	}
	if n := e.sup.Stats().Started; n != 0 {
		t.Errorf("%d commands started, want none", n)
	}
}

// TestBatchSlots: a batch takes min(concurrency, requests, MaxConcurrent)
// command slots at once, or is refused with 429 before anything starts.
func TestBatchSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withMaxConcurrent(3))
	body := func(n, conc int) string {
		var reqs []string
		for range n {
			reqs = append(reqs, `{"command":"true"}`)
		}
		return fmt.Sprintf(`{"requests":[%s],"concurrency":%d}`, strings.Join(reqs, ","), conc)
	}
	// More concurrency than the server allows runs at the server's 3.
	if code, b := e.do(context.Background(), "POST", "/v1/batch", body(8, 4)); code != http.StatusOK {
		t.Errorf("8 at 4 on 3 slots: status %d %s", code, b)
	}
	// One slot held by a running command: a batch needing 3 is refused.
	ctx, cancel := context.WithCancel(context.Background())
	resp := e.send(ctx, "POST", "/v1/exec", `{"command":"echo up; sleep 30"}`, "Accept", api.NDJSONType)
	defer resp.Body.Close()
	defer cancel()
	events(t, resp.Body, func(_ []byte, ev supervisor.Event) bool { return ev.Event != supervisor.EventOutput })
	started := e.sup.Stats().Started
	code, b := e.do(context.Background(), "POST", "/v1/batch", body(4, 3))
	if code != http.StatusTooManyRequests || errorCode(t, b) != api.CodeResourceExhausted ||
		!strings.Contains(string(b), "the batch needs 3 command slots") {
		t.Errorf("status %d %s, want 429", code, b)
	}
	if n := e.sup.Stats().Started; n != started {
		t.Errorf("%d commands started by a refused batch", n-started)
	}
	// Two fit beside it.
	if code, b := e.do(context.Background(), "POST", "/v1/batch", body(4, 2)); code != http.StatusOK {
		t.Errorf("4 at 2 beside a running command: status %d %s", code, b)
	}
}

func TestBatchJournaled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withJournal(t))
	code, posted := e.do(context.Background(), "POST", "/v1/batch",
		`{"session":"s1","requests":[{"command":"seq 3000"},{"command":"seq 4000 >&2"}],"budget":4096}`)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, posted)
	}
	var res supervisor.BatchResult
	if err := json.Unmarshal(posted, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.Results[0].ID == "" || res.Results[1].ID == "" {
		t.Fatalf("batch %s", posted)
	}
	code, got := e.do(context.Background(), "GET", "/v1/sessions/s1/batches/"+res.ID, "")
	if code != http.StatusOK || !bytes.Equal(got, posted) {
		t.Errorf("GET: status %d\n%s\nwant the POST's\n%s", code, got, posted)
	}
	for _, tt := range []struct {
		path     string
		code     int
		wantCode string
	}{
		{"/v1/sessions/s1/batches/b-nope-1", http.StatusNotFound, api.CodeNotFound},  // unknown batch
		{"/v1/sessions/s2/batches/" + res.ID, http.StatusNotFound, api.CodeNotFound}, // another session
		{"/v1/sessions/..%2Fx/batches/" + res.ID, http.StatusBadRequest, api.CodeInvalidArgument},
	} {
		code, b := e.do(context.Background(), "GET", tt.path, "")
		if code != tt.code || errorCode(t, b) != tt.wantCode {
			t.Errorf("GET %s: %d %s, want %d %s", tt.path, code, b, tt.code, tt.wantCode)
		}
	}
}

func TestBatchNoJournal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, b := e.do(context.Background(), "GET", "/v1/sessions/s1/batches/b-x-1", "")
	if code != http.StatusNotFound || errorCode(t, b) != api.CodeNotFound || !strings.Contains(string(b), "no journal") {
		t.Errorf("status %d %s, want 404", code, b)
	}
}

// TestBatchClientGone: a client that goes away aborts its batch: the
// running command's tree is killed at once (it ignores SIGTERM, and the
// grace is 10 s), the next is never started, and the journal says both.
func TestBatchClientGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withJournal(t), withGrace(10*time.Second))
	_, m := proctest.Marker(t)
	flag := filepath.Join(t.TempDir(), "up")
	body := fmt.Sprintf(`{"session":"gone","concurrency":1,"requests":[{"command":%s},{"command":"echo never"}]}`,
		jsonString(marked(m, "trap '' TERM; touch "+flag+"; sleep 30")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			if _, err := os.Stat(flag); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/batch", strings.NewReader(body))
	if resp, err := e.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the batch answered %s after the client went away", resp.Status)
	}
	proctest.NoSurvivors(t, m, time.Second)

	var results []supervisor.Result
	deadline := time.Now().Add(10 * time.Second)
	for len(results) < 2 && time.Now().Before(deadline) {
		entries, _, err := e.sup.Sessions().Journal().List("gone", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		results = results[:0]
		for _, b := range entries {
			var en struct{ Result *supervisor.Result }
			if json.Unmarshal(b, &en) == nil && en.Result != nil {
				results = append(results, *en.Result)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(results) != 2 {
		t.Fatalf("%d entries ended, want 2", len(results))
	}
	if r := results[0]; !r.Aborted || r.Signal != "SIGKILL" {
		t.Errorf("the running command: aborted %v signal %q, want SIGKILL at once", r.Aborted, r.Signal)
	}
	if r := results[1]; r.Stderr != "[corral: the command did not start: the batch was cancelled before its turn.]" {
		t.Errorf("the waiting command: %+v", r)
	}
}
