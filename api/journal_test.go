package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/supervisor"
)

// withJournal gives the env's supervisor a journal in its data directory,
// closed after the supervisor.
func withJournal(t *testing.T) option {
	return func(_ *api.Config, c *supervisor.Config) {
		j, err := journal.Open(c.DataDir, journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		c.Journal = j
	}
}

// execRaw runs a command and returns the response body as sent.
func (e *env) execRaw(body string) []byte {
	e.t.Helper()
	code, b := e.do(context.Background(), "POST", "/v1/exec", body)
	if code != http.StatusOK {
		e.t.Fatalf("exec %s: %d %s", body, code, b)
	}
	return b
}

func TestSessionsHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withJournal(t))
	ctx := context.Background()
	var bodies [][]byte
	for _, cmd := range []string{"echo one", "export K=v; echo '<two>'", "exit 3"} {
		bodies = append(bodies, e.execRaw(`{"session": "hs", "command": `+jsonString(cmd)+`}`))
	}
	var last supervisor.Result
	json.Unmarshal(bodies[1], &last)

	// The list and the session.
	code, b := e.do(ctx, "GET", "/v1/sessions", "")
	var list api.SessionList
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Sessions) != 1 || list.Sessions[0].ID != "hs" || list.Sessions[0].Results != 3 {
		t.Fatalf("GET /v1/sessions: %d %s", code, b)
	}
	code, b = e.do(ctx, "GET", "/v1/sessions/hs", "")
	var d api.SessionDetail
	if code != 200 || json.Unmarshal(b, &d) != nil || d.Results != 3 || !slices.Contains(d.EnvNames, "K") || d.Cwd == "" {
		t.Fatalf("GET /v1/sessions/hs: %d %s", code, b)
	}

	// A page of the history: the entry holds the Result exactly as the exec sent it.
	code, b = e.do(ctx, "GET", "/v1/sessions/hs/results?after=1&limit=1", "")
	var page struct {
		Entries []json.RawMessage `json:"entries"`
		Next    uint64            `json:"next"`
	}
	if code != 200 || json.Unmarshal(b, &page) != nil || len(page.Entries) != 1 || page.Next != 2 {
		t.Fatalf("results page: %d %s", code, b)
	}
	var entry journal.Entry
	json.Unmarshal(page.Entries[0], &entry)
	if entry.ID != last.ID || entry.Seq != 2 || !bytes.Equal(append([]byte(entry.Result), '\n'), bodies[1]) {
		t.Fatalf("entry %s\nexec body %s", page.Entries[0], bodies[1])
	}
	// One entry, byte for byte the same every time and as in the page.
	_, one := e.do(ctx, "GET", "/v1/sessions/hs/results/"+last.ID, "")
	_, again := e.do(ctx, "GET", "/v1/sessions/hs/results/"+last.ID, "")
	if !bytes.Equal(one, again) || !bytes.Equal(one, page.Entries[0]) {
		t.Fatalf("GET result differs:\n%s\n%s", one, again)
	}
	// The default page and the end of the history.
	code, b = e.do(ctx, "GET", "/v1/sessions/hs/results", "")
	if code != 200 || json.Unmarshal(b, &page) != nil || len(page.Entries) != 3 || page.Next != 3 {
		t.Fatalf("default page: %d %s", code, b)
	}
	code, b = e.do(ctx, "GET", "/v1/sessions/hs/results?after=3", "")
	if code != 200 || string(b) != `{"entries":[],"next":3}`+"\n" {
		t.Fatalf("past the end: %d %s", code, b)
	}

	for _, tc := range []struct {
		path string
		code int
	}{
		// An unknown session, in each route.
		{"/v1/sessions/nope", 404},
		{"/v1/sessions/nope/results", 404},
		{"/v1/sessions/nope/results/r-1", 404},
		// An unknown result of a known session.
		{"/v1/sessions/hs/results/r-00000000-1", 404},
		{"/v1/sessions/hs/results/" + strings.Replace(last.ID, "-2", "-9", 1), 404},
		// after negative, not a number, empty.
		{"/v1/sessions/hs/results?after=-1", 400},
		{"/v1/sessions/hs/results?after=x", 400},
		{"/v1/sessions/hs/results?after=", 400},
		// limit above 1,000, zero, not a number.
		{"/v1/sessions/hs/results?limit=1001", 400},
		{"/v1/sessions/hs/results?limit=0", 400},
		{"/v1/sessions/hs/results?limit=ten", 400},
		// Session IDs against the spill-name rules.
		{"/v1/sessions/a%20b", 400},
		{"/v1/sessions/a%2Fb/results", 400},
		{"/v1/sessions/" + strings.Repeat("x", 129) + "/results", 400},
	} {
		code, b := e.do(ctx, "GET", tc.path, "")
		if code != tc.code {
			t.Errorf("GET %s: %d %s, want %d", tc.path, code, b, tc.code)
			continue
		}
		if c := errorCode(t, b); (tc.code == 404) != (c == api.CodeNotFound) {
			t.Errorf("GET %s: code %s", tc.path, c)
		}
	}

	// DELETE removes the journal too.
	if code, b := e.do(ctx, "DELETE", "/v1/sessions/hs", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, b)
	}
	if code, _ := e.do(ctx, "GET", "/v1/sessions/hs/results/"+last.ID, ""); code != 404 {
		t.Fatalf("after DELETE: %d", code)
	}
	if code, _ := e.do(ctx, "GET", "/v1/sessions/hs", ""); code != 404 {
		t.Fatalf("session after DELETE: %d", code)
	}
}

func TestHistoryTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withJournal(t))
	for _, cmd := range []string{"echo a", "printf 'line1\\nline2' && exit 4\necho second line", "true"} {
		e.execRaw(`{"session": "mh", "command": ` + jsonString(cmd) + `}`)
	}
	call := mcpCaller(t, e, "")
	r := call(api.ToolHistory, map[string]any{"session": "mh", "limit": 2})
	text := toolText(r)
	lines := strings.Split(text, "\n")
	if r.IsError || len(lines) != 6 || !strings.HasPrefix(lines[1], `[2] $ printf 'line1\nline2' && exit 4 … (r-`) ||
		!strings.HasPrefix(lines[2], "[exit code 4 after ") || !strings.HasPrefix(lines[3], "[3] $ true (r-") ||
		strings.Contains(text, "line2\n") {
		t.Fatalf("history text:\n%s", text)
	}
	// Controls of every kind in a command never reach the history line:
	// C0, C1, the line separators, bidi overrides.
	e.execRaw(`{"session": "mh", "command": ` + jsonString("true # a\x1b\u0085\u2028\u202eb\r") + `}`)
	if text := toolText(call(api.ToolHistory, map[string]any{"session": "mh", "limit": 1})); !strings.Contains(text, "$ true # a????b (r-") {
		t.Errorf("history of a command with control characters:\n%q", text)
	}
	for _, args := range []map[string]any{{"session": "mh", "limit": 51}, {"session": "nope"}, {"session": "a/b"}} {
		if r := call(api.ToolHistory, args); !r.IsError {
			t.Errorf("history %v: %s", args, toolText(r))
		}
	}
}
