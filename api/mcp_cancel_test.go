package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// mcpVersions are the protocol versions the server accepts (go-sdk v1.8.0).
var mcpVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// rawMCP speaks JSON-RPC over streamable HTTP by hand, as curl would.
type rawMCP struct {
	e       *env
	version string
	session string // Mcp-Session-Id; "" when sessionless
}

// request makes the POST of one JSON-RPC message with the headers of the
// protocol version and the session.
func (c *rawMCP) request(ctx context.Context, body string, method, name string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, "POST", c.e.ts.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		c.e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.version >= "2025-06-18" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	if c.version >= "2026-07-28" {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	return req
}

// post sends one JSON-RPC message and returns the open response.
func (c *rawMCP) post(ctx context.Context, body string, method, name string) *http.Response {
	c.e.t.Helper()
	resp, err := c.e.client.Do(c.request(ctx, body, method, name))
	if err != nil {
		c.e.t.Fatalf("POST /mcp %s: %v", method, err)
	}
	return resp
}

// initialize opens a session (protocols before 2026-07-28).
func (c *rawMCP) initialize() {
	t := c.e.t
	t.Helper()
	resp := c.post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, c.version), "initialize", "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || c.session == "" || !strings.Contains(string(b), `"protocolVersion":"`+c.version+`"`) {
		t.Fatalf("initialize %s: %d, session %q: %s", c.version, resp.StatusCode, c.session, b)
	}
	resp = c.post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notifications/initialized", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
}

// callBody is tools/call bash with id 2.
func (c *rawMCP) callBody(command string, progressToken string) string {
	meta := ""
	if progressToken != "" {
		meta = fmt.Sprintf(`"progressToken":%q`, progressToken)
	}
	if c.version >= "2026-07-28" {
		if meta != "" {
			meta += ","
		}
		meta += fmt.Sprintf(`"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}`, c.version)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":%s},"_meta":{%s}}}`,
		jsonString(command), meta)
}

// callBash sends tools/call bash with id 2 and returns its response once
// the headers arrived (with the first message); the body streams the rest.
func (c *rawMCP) callBash(ctx context.Context, command string, progressToken string) *http.Response {
	resp := c.post(ctx, c.callBody(command, progressToken), "tools/call", "bash")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.e.t.Fatalf("tools/call %s: %d: %s", c.version, resp.StatusCode, b)
	}
	return resp
}

// goneWithin polls until no process carries marker and returns how long
// that took, failing the test past max.
func goneWithin(t *testing.T, marker string, max time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	for len(proctest.Survivors(marker)) > 0 {
		if time.Since(begin) > max {
			proctest.NoSurvivors(t, marker, 0) // reports them and kills them
			t.Fatalf("the tree outlived %v", max)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(begin)
}

// TestMCPCancelEveryVersion: at every protocol version the server accepts,
// a tools/call whose client disconnects has its tree (which ignores
// SIGTERM) SIGKILLed at once, within a second; a notifications/cancelled
// for it (sessions, before 2026-07-28) kills it after SIGTERM and the
// grace. On 2026-07-28 a request is cancelled by closing its POST (SEP-2575
// has no session for a cancel notification to land in). "oneshot" is a
// tools/call with no session at all, as curl sends it.
func TestMCPCancelEveryVersion(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	e := newEnv(t, withGrace(grace))
	type tc struct {
		version, how string
	}
	var cases []tc
	for _, v := range mcpVersions {
		cases = append(cases, tc{v, "disconnect"})
		if v < "2026-07-28" {
			cases = append(cases, tc{v, "cancelled"}, tc{v, "oneshot"})
		}
	}
	for _, c := range cases {
		t.Run(c.version+"/"+c.how, func(t *testing.T) {
			t.Parallel()
			cl := &rawMCP{e: e, version: c.version}
			if c.how != "oneshot" && c.version < "2026-07-28" {
				cl.initialize()
			}
			_, marker := proctest.Marker(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The response headers come with the first message: the call
			// runs in the background.
			done := make(chan struct{})
			go func() {
				defer close(done)
				req := cl.request(ctx, cl.callBody(marked(marker, "trap '' TERM; sleep 60 & sleep 60 & echo ready; wait"), ""), "tools/call", "bash")
				if resp, err := e.client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			defer func() { cancel(); <-done }()
			waitFor(t, 30*time.Second, func() bool { return len(proctest.Survivors(marker)) >= 2 }) // both sleeps
			switch c.how {
			case "cancelled":
				r := cl.post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"test"}}`, "notifications/cancelled", "")
				r.Body.Close()
				if r.StatusCode != http.StatusAccepted {
					t.Fatalf("notifications/cancelled: %d", r.StatusCode)
				}
				// SIGTERM is ignored: the tree lives through the grace, then dies.
				took := goneWithin(t, marker, grace+2*time.Second)
				if took < grace-100*time.Millisecond {
					t.Errorf("gone after %v, before the %v grace", took, grace)
				}
				t.Logf("tree gone %v after notifications/cancelled", took)
			default:
				cancel()
				t.Logf("tree gone %v after the POST closed", goneWithin(t, marker, time.Second))
			}
		})
	}
}

// TestMCPHeartbeat: a silent call with a progress token gets progress
// notifications without output every heartbeat.
func TestMCPHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withHeartbeat(100*time.Millisecond))
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			cl := &rawMCP{e: e, version: v}
			if v < "2026-07-28" {
				cl.initialize()
			}
			resp := cl.callBash(context.Background(), "echo a; sleep 1; echo b", "tok")
			defer resp.Body.Close()
			var beats, outputs int
			var result string
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				var msg struct {
					Method string `json:"method"`
					Params struct {
						ProgressToken string         `json:"progressToken"`
						Message       string         `json:"message"`
						Meta          map[string]any `json:"_meta"`
					} `json:"params"`
					Result json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal([]byte(data), &msg); err != nil {
					t.Fatalf("%v: %s", err, data)
				}
				switch {
				case msg.Result != nil:
					result = string(msg.Result)
				case msg.Method == "notifications/progress" && msg.Params.Meta["event"] == "keepalive":
					if msg.Params.Message != "" || msg.Params.ProgressToken != "tok" {
						t.Errorf("heartbeat %s", data)
					}
					beats++
				case msg.Method == "notifications/progress":
					outputs++
				}
			}
			if beats < 5 || beats > 12 || outputs != 2 || !strings.Contains(result, `exit code 0`) {
				t.Errorf("%d heartbeats (want about 10), %d outputs, result %s", beats, outputs, result)
			}
		})
	}
}

// TestMCPSessionBounds: sessions are bounded in number (one more gets 429
// RESOURCE_EXHAUSTED with Retry-After) and closed after the idle time, which
// frees their place.
func TestMCPSessionBounds(t *testing.T) {
	t.Parallel()
	// Long enough that the checks before it run within it under load.
	const idle = 2 * time.Second
	e := newEnv(t, func(c *api.Config, _ *supervisor.Config) { c.MCPSessions, c.MCPSessionIdle = 2, idle })
	var open []*rawMCP
	for range 2 {
		cl := &rawMCP{e: e, version: "2025-11-25"}
		cl.initialize()
		open = append(open, cl)
	}
	lastUsed := time.Now()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	cl := &rawMCP{e: e, version: "2025-11-25"}
	resp := cl.post(context.Background(), init, "initialize", "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || errorCode(t, b) != api.CodeResourceExhausted || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a third session: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	// A one-shot call needs no session and still works.
	resp = cl.post(context.Background(), cl.callBody("echo hi", ""), "tools/call", "bash")
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `hi\n[exit code 0`) {
		t.Errorf("one-shot call: %d %s", resp.StatusCode, b)
	}

	// Idle sessions close, which frees their places; their IDs are then
	// unknown.
	waitFor(t, 10*idle, func() bool {
		resp := cl.post(context.Background(), init, "initialize", "")
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	// (The server's idle clock starts as it ends the last response, a little
	// before the client has read it.)
	if d := time.Since(lastUsed); d < idle-100*time.Millisecond {
		t.Errorf("a place was free %v after the sessions were last used, before the %v idle time", d, idle)
	}
	resp = open[0].post(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"ping"}`, "ping", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a ping in an expired session: %d, want 404", resp.StatusCode)
	}
}
