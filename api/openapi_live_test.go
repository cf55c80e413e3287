package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// contract is the OpenAPI document, parsed for checking live responses:
// each response of the server is matched to its path, operation, status
// and media type, and its body validated against that schema with
// jsonschema-go (the component schemas become $defs of one root).
type contract struct {
	doc struct {
		Paths      map[string]map[string]docOperation `json:"paths"`
		Components struct {
			Schemas   map[string]json.RawMessage `json:"schemas"`
			Responses map[string]docResponse     `json:"responses"`
		} `json:"components"`
	}
	defs     json.RawMessage // components.schemas, its refs rewritten to $defs
	mu       sync.Mutex
	resolved map[string]*jsonschema.Resolved // by component name; guarded by mu
	seen     map[string]bool                 // "METHOD path status" validated; guarded by mu
}

type docOperation struct {
	OperationID string                 `json:"operationId"`
	Responses   map[string]docResponse `json:"responses"`
}

type docResponse struct {
	Ref     string                     `json:"$ref"`
	Content map[string]json.RawMessage `json:"content"`
}

// loadContract parses the document the server embeds.
func loadContract(t *testing.T) *contract {
	t.Helper()
	c := &contract{resolved: map[string]*jsonschema.Resolved{}, seen: map[string]bool{}}
	if err := json.Unmarshal(api.OpenAPI(), &c.doc); err != nil {
		t.Fatal(err)
	}
	defs, err := json.Marshal(c.doc.Components.Schemas)
	if err != nil {
		t.Fatal(err)
	}
	c.defs = bytes.ReplaceAll(defs, []byte(`"#/components/schemas/`), []byte(`"#/$defs/`))
	return c
}

// schema resolves the component schema name.
func (c *contract) schema(t *testing.T, name string) *jsonschema.Resolved {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.resolved[name]; r != nil {
		return r
	}
	var s jsonschema.Schema
	root := fmt.Sprintf(`{"$defs":%s,"$ref":"#/$defs/%s"}`, c.defs, name)
	if err := json.Unmarshal([]byte(root), &s); err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve %s: %v", name, err)
	}
	c.resolved[name] = r
	return r
}

// route finds the document's path template for a request path: the
// template whose segments match, literal segments before parameters.
func (c *contract) route(path string) string {
	segs := strings.Split(path, "/")
	best, bestScore := "", -1
	for tmpl := range c.doc.Paths {
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		score := 0
		for i := range ts {
			switch {
			case ts[i] == segs[i]:
				score++
			case strings.HasPrefix(ts[i], "{"):
			default:
				score = -1
			}
			if score < 0 {
				break
			}
		}
		if score > bestScore {
			best, bestScore = tmpl, score
		}
	}
	return best
}

// check validates one response against the document and records it. A
// path the document lacks, or a method it does not serve there, must be
// the error JSON with 404 or 405.
func (c *contract) check(t *testing.T, method, path string, status int, header http.Header, body []byte) {
	t.Helper()
	tmpl := c.route(path)
	op, ok := c.doc.Paths[tmpl][strings.ToLower(method)]
	if !ok {
		if tmpl == "" && status != http.StatusNotFound || tmpl != "" && status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d for a route the document lacks (template %q)", method, path, status, tmpl)
		}
		c.validateJSON(t, method+" "+path, "Error", body)
		c.record(method, "*", status)
		return
	}
	resp, ok := op.Responses[fmt.Sprint(status)]
	if !ok {
		t.Errorf("%s %s: status %d is not documented for %s (%s)", method, path, status, op.OperationID, body)
		return
	}
	if name, ok := strings.CutPrefix(resp.Ref, "#/components/responses/"); ok {
		resp = c.doc.Components.Responses[name]
	}
	c.record(method, tmpl, status)
	if len(resp.Content) == 0 {
		if len(body) != 0 {
			t.Errorf("%s %s: %d has a body the document does not describe: %q", method, path, status, body)
		}
		return
	}
	media, _, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil {
		t.Errorf("%s %s: Content-Type %q: %v", method, path, header.Get("Content-Type"), err)
		return
	}
	raw, ok := resp.Content[media]
	if !ok {
		t.Errorf("%s %s: %d as %s, which the document does not list", method, path, status, media)
		return
	}
	var sch struct {
		Ref string `json:"$ref"`
	}
	json.Unmarshal(raw, &sch)
	var schemaWrap struct {
		Schema struct {
			Ref string `json:"$ref"`
		} `json:"schema"`
	}
	json.Unmarshal(raw, &schemaWrap)
	name, ok := strings.CutPrefix(schemaWrap.Schema.Ref, "#/components/schemas/")
	if !ok {
		return // an opaque body: /mcp, /metrics, the document itself
	}
	if media == api.NDJSONType {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			c.validateJSON(t, method+" "+path, name, sc.Bytes())
		}
		return
	}
	c.validateJSON(t, method+" "+path, name, body)
}

func (c *contract) record(method, tmpl string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[fmt.Sprintf("%s %s %d", method, tmpl, status)] = true
}

func (c *contract) validateJSON(t *testing.T, what, name string, body []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s: not JSON (%v): %q", what, err, body)
		return
	}
	if err := c.schema(t, name).Validate(v); err != nil {
		t.Errorf("%s: the body is not a valid %s: %v\n%s", what, name, err, body)
	}
}

// liveClient sends requests to an env and checks every response against
// the contract.
type liveClient struct {
	t *testing.T
	e *env
	c *contract
}

// do sends a request (hdr: name, value pairs; "Authorization", "" sends
// none), checks the response and returns its status and body.
func (l *liveClient) do(method, path, body string, hdr ...string) (int, []byte) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, l.e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	if l.e.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.e.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := l.e.client.Do(req)
	if err != nil {
		l.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		l.t.Fatalf("%s %s: %v", method, path, err)
	}
	l.c.check(l.t, method, req.URL.Path, resp.StatusCode, resp.Header, b)
	return resp.StatusCode, b
}

// want is do that fails the test unless the status is status, decoding a
// JSON body into v when v is not nil.
func (l *liveClient) want(status int, v any, method, path, body string, hdr ...string) []byte {
	l.t.Helper()
	got, b := l.do(method, path, body, hdr...)
	if got != status {
		l.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, status, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			l.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return b
}

// TestOpenAPILive drives every route of the document and validates each
// live response (the error statuses 400, 401, 403, 404, 405, 408, 413, 429
// and 503 too) against the document's schemas; it fails when a route or a
// documented success status was not seen, so a route added to the
// document must be exercised here.
func TestOpenAPILive(t *testing.T) {
	t.Parallel()
	c := loadContract(t)
	e := newEnv(t, withToken(testToken), withJournal(t), withHeartbeat(100*time.Millisecond))
	l := &liveClient{t: t, e: e, c: c}

	// The unauthenticated routes, and the document served as embedded.
	l.want(200, nil, "GET", "/healthz", "", "Authorization", "")
	if doc := l.want(200, nil, "GET", "/openapi.json", "", "Authorization", ""); !bytes.Equal(doc, api.OpenAPI()) {
		t.Error("GET /openapi.json is not the embedded document")
	}
	l.want(200, nil, "GET", "/metrics", "")

	// Events first, so that they see the jobs below.
	events := l.events()

	// Commands: plain, cut with a spill, killed by a signal, streamed.
	var res supervisor.Result
	l.want(200, &res, "POST", "/v1/exec", `{"command":"echo hi; echo err >&2","session":"s1"}`)
	l.want(200, &res, "POST", "/v1/exec", `{"command":"seq 200000","session":"s1"}`)
	if res.StdoutInfo.SpillPath == "" {
		t.Fatalf("no spill: %+v", res.StdoutInfo)
	}
	spill := res.StdoutInfo.SpillPath
	l.want(200, &res, "POST", "/v1/exec", `{"command":"kill -9 $$"}`)
	if res.ExitCode != nil || res.Signal == "" {
		t.Errorf("killed: %+v", res)
	}
	l.want(200, nil, "POST", "/v1/exec", `{"command":"echo a; seq 3 >&2"}`, "Accept", api.NDJSONType)
	l.want(200, nil, "POST", "/v1/read", `{"path":`+jsonString(spill)+`,"limit":3}`)
	l.want(200, nil, "POST", "/v1/grep", `{"path":`+jsonString(spill)+`,"pattern":"^1999"}`)

	// A batch, its journal entries and the session routes.
	var batch supervisor.BatchResult
	l.want(200, &batch, "POST", "/v1/batch", `{"session":"s1","requests":[{"command":"echo a"},{"command":"exit 3"}]}`)
	l.want(200, nil, "GET", "/v1/sessions/s1/batches/"+batch.ID, "")
	l.want(200, nil, "GET", "/v1/sessions/s1/results/"+batch.Results[0].ID, "")
	l.want(200, nil, "GET", "/v1/sessions/s1/results?after=1&limit=2", "")
	l.want(200, nil, "GET", "/v1/sessions", "")
	l.want(200, nil, "GET", "/v1/sessions/s1", "")

	// An interactive job through its whole life: waiting, answered with a
	// yield, then its end.
	var st supervisor.JobStarted
	l.want(200, &st, "POST", "/v1/jobs", `{"command":"echo name?; read x; echo got $x; read y","interactive":true,"session":"s1"}`)
	l.waiting(st.ID)
	l.want(200, nil, "GET", "/v1/jobs", "")
	l.want(200, nil, "GET", "/v1/jobs/"+st.ID+"/output?stream=stdout&after=0&wait=1", "")
	l.want(200, nil, "POST", "/v1/jobs/"+st.ID+"/stdin?yield=5", "bob\n")
	l.want(204, nil, "POST", "/v1/jobs/"+st.ID+"/stdin?close=true", "end\n")
	l.want(200, nil, "POST", "/v1/jobs/"+st.ID+"/wait?timeout=10", "")
	l.want(200, nil, "GET", "/v1/jobs/"+st.ID, "")
	l.want(200, nil, "GET", "/v1/sessions/s1", "") // with its job

	// A terminal job: its status, screen and resize; killed.
	l.want(200, &st, "POST", "/v1/jobs", `{"command":"printf 'user: '; read x","tty":{"cols":60,"rows":10}}`)
	l.waiting(st.ID)
	l.want(200, nil, "GET", "/v1/jobs/"+st.ID+"/screen", "")
	l.want(204, nil, "POST", "/v1/jobs/"+st.ID+"/resize", `{"cols":70,"rows":12}`)
	l.want(200, nil, "DELETE", "/v1/jobs/"+st.ID, "")

	// A job still running at a wait's deadline: 408; then killed.
	l.want(200, &st, "POST", "/v1/jobs", `{"command":"sleep 30"}`)
	l.want(408, nil, "POST", "/v1/jobs/"+st.ID+"/wait?timeout=0", "")
	l.want(200, nil, "DELETE", "/v1/jobs/"+st.ID, "")
	l.want(204, nil, "DELETE", "/v1/sessions/s2", "")

	// The events the jobs above made: exited, waiting and keepalives.
	l.checkEvents(events)

	// /mcp, opaque: an initialize, its stream and its end.
	l.mcp()

	// Errors.
	l.want(400, nil, "POST", "/v1/exec", `{"command":"true","Command":"x"}`)
	l.want(400, nil, "GET", "/v1/jobs/"+st.ID+"/screen", "") // not a terminal job
	l.want(401, nil, "POST", "/v1/exec", `{"command":"true"}`, "Authorization", "")
	l.want(403, nil, "POST", "/v1/exec", `{"command":"true"}`, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	l.want(404, nil, "GET", "/v1/jobs/j-nope", "")
	l.want(404, nil, "GET", "/v1/nope", "")
	l.want(404, nil, "POST", "/v1/read", `{"path":"nope"}`)
	l.want(405, nil, "GET", "/v1/exec", "")
	l.want(413, nil, "POST", "/v1/exec", `{"command":"`+strings.Repeat("x", api.MaxBodyBytes)+`"}`)
	l.busyAndShutdown(c)

	// Every operation's success statuses, and each error status, were seen.
	for path, ops := range c.doc.Paths {
		for method, op := range ops {
			for status := range op.Responses {
				if status[0] != '2' {
					continue
				}
				if path == "/mcp" && status == "202" {
					continue // a POST of notifications only; mcp() sends none
				}
				if !c.seen[fmt.Sprintf("%s %s %s", strings.ToUpper(method), path, status)] {
					t.Errorf("%s %s %s (%s): never seen live", strings.ToUpper(method), path, status, op.OperationID)
				}
			}
		}
	}
	for _, status := range []int{400, 401, 403, 404, 405, 408, 413, 429, 503} {
		found := false
		for k := range c.seen {
			found = found || strings.HasSuffix(k, fmt.Sprintf(" %d", status))
		}
		if !found {
			t.Errorf("no %d seen", status)
		}
	}
}

// waiting polls a job's status until it waits for input.
func (l *liveClient) waiting(id string) {
	l.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var js supervisor.JobStatus
		l.want(200, &js, "GET", "/v1/jobs/"+id, "")
		if js.Waiting != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.t.Fatalf("job %s never waited for input", id)
}

// liveEvents is an open GET /v1/events stream.
type liveEvents struct {
	resp  *http.Response
	lines chan []byte
}

func (l *liveClient) events() *liveEvents {
	l.t.Helper()
	resp := l.e.send(context.Background(), "GET", "/v1/events", "")
	if resp.StatusCode != 200 {
		l.t.Fatalf("events: %d", resp.StatusCode)
	}
	ev := &liveEvents{resp: resp, lines: make(chan []byte, 1024)}
	go func() {
		defer close(ev.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			ev.lines <- slices.Clone(sc.Bytes())
		}
	}()
	l.t.Cleanup(func() { resp.Body.Close() })
	return ev
}

// checkEvents validates the lines the stream carried so far as one NDJSON
// body, and wants exited, waiting and keepalive among them.
func (l *liveClient) checkEvents(ev *liveEvents) {
	l.t.Helper()
	var body bytes.Buffer
	kinds := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for !kinds["exited"] || !kinds["waiting"] || !kinds["keepalive"] {
		select {
		case line, ok := <-ev.lines:
			if !ok {
				l.t.Fatal("the event stream ended")
			}
			body.Write(line)
			body.WriteByte('\n')
			var e struct{ Event string }
			json.Unmarshal(line, &e)
			kinds[e.Event] = true
		case <-deadline:
			l.t.Fatalf("events: saw %v", kinds)
		}
	}
	l.c.check(l.t, "GET", "/v1/events", ev.resp.StatusCode, ev.resp.Header, body.Bytes())
}

// mcp opens an MCP session over /mcp, its GET stream and its DELETE,
// checking their statuses and media types.
func (l *liveClient) mcp() {
	l.t.Helper()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	resp := l.e.send(context.Background(), "POST", "/mcp", init, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	l.c.check(l.t, "POST", "/mcp", resp.StatusCode, resp.Header, b)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		l.t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	resp = l.e.send(ctx, "GET", "/mcp", "", "Accept", "text/event-stream", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	l.c.check(l.t, "GET", "/mcp", resp.StatusCode, resp.Header, nil)
	cancel()
	resp.Body.Close()
	status, b := l.do("DELETE", "/mcp", "", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	if status/100 != 2 {
		l.t.Errorf("DELETE /mcp: %d %s", status, b)
	}
}

// busyAndShutdown gets a 429 from a server whose one command slot is
// taken, and a 503 from it once it shuts down.
func (l *liveClient) busyAndShutdown(c *contract) {
	l.t.Helper()
	e := newEnv(l.t, withMaxConcurrent(1))
	busy := &liveClient{t: l.t, e: e, c: c}
	started := filepath.Join(l.t.TempDir(), "started")
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.do(context.Background(), "POST", "/v1/exec", `{"command":"touch `+started+`; sleep 20"}`)
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			l.t.Fatal("the command holding the slot never started")
		}
	}
	busy.want(429, nil, "POST", "/v1/exec", `{"command":"true"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		l.t.Fatal(err)
	}
	<-done
	busy.want(503, nil, "POST", "/v1/exec", `{"command":"true"}`)
}
