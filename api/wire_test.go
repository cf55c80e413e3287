package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
)

// errorBody decodes the error JSON (failing the test when b is not exactly
// that) and returns it.
func errorBody(t *testing.T, b []byte) api.ErrorDetail {
	t.Helper()
	errorCode(t, b)
	var body api.ErrorBody
	json.Unmarshal(b, &body)
	return body.Error
}

// inMemoryMCP connects a go-sdk client to e's MCP server over in-memory
// transports (no HTTP body limit, no strictBody: only the tool-call
// middleware stands between the arguments and the tool).
func inMemoryMCP(t *testing.T, e *env) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.srv.MCPServer().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := newMCPClient().Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// callRaw calls tool with args, a JSON text sent as it is.
func callRaw(t *testing.T, cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	return r
}

// mcpHTTPCall posts one tools/call of tool with args (sent as they are) to
// /mcp and returns the refusal's code and message: the error JSON of an
// HTTP error, or the code and message of a tool error.
func mcpHTTPCall(t *testing.T, e *env, tool, args string) (code, msg string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	status, b := e.do(context.Background(), "POST", "/mcp", body,
		"Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if status != http.StatusOK {
		d := errorBody(t, b)
		return d.Code, d.Message
	}
	var data string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = rest
		}
	}
	var resp struct {
		Result mcp.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(data), &resp); err != nil {
		t.Fatalf("MCP response %s: %v", b, err)
	}
	if !resp.Result.IsError {
		return "", toolText(&resp.Result)
	}
	code, msg, _ = strings.Cut(toolText(&resp.Result), ": ")
	return code, msg
}

// TestStrictDecoding: what encoding/json would read differently from a
// strict reader (or a filtering proxy) is refused with INVALID_ARGUMENT
// naming the key and the byte, on every endpoint that takes JSON and in MCP
// tool arguments, and nothing runs.
func TestStrictDecoding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := inMemoryMCP(t, e)
	started := filepath.Join(t.TempDir(), "started")
	run := jsonString("touch " + started) // a command whose run leaves a trace

	// Each endpoint: its first key, a valid value for it, the other keys it
	// needs, and whether it has an env object.
	endpoints := []struct {
		name, key, val, extra string
		env                   bool
	}{
		{"/v1/exec", "command", run, "", true},
		{"/v1/jobs", "command", run, "", true},
		{"/v1/read", "path", `"x.log"`, "", false},
		{"/v1/grep", "path", `"x.log"`, `"pattern":"x",`, false},
		{"mcp http bash", "command", run, "", false},
		{"mcp bash", "command", run, "", false},
		{"mcp read_output", "path", `"x.log"`, "", false},
	}
	// Each row: the object with K for the endpoint's key and V for its
	// value, and what the message must say (with K replaced too).
	tests := []struct {
		name, body, want string
		env              bool // only where the endpoint has env
	}{
		{"duplicate key", `{"<K>":<V>,"<K>":<V>}`, `duplicate key "<K>" at byte`, false},                                 // the last would win
		{"case-variant key", `{"<K>":<V>,"<UK>":<V>}`, `key "<UK>" at byte`, false},                                      // encoding/json folds case
		{"case-variant key alone", `{"<UK>":<V>}`, `is not "<K>": keys are case-sensitive`, false},                       // the only spelling
		{"escaped duplicate", `{"<K>":<V>,"<EK>":<V>}`, `duplicate key "<K>"`, false},                                    // the same key, escaped
		{"duplicate in env", `{"<K>":<V>,"env":{"A":"1","A":"2"}}`, `duplicate key "A" in env at byte`, true},            // nested
		{"invalid UTF-8", "{\"<K>\":\"x\xff\"}", `invalid UTF-8 at byte`, false},                                         // a stray byte
		{"invalid UTF-8 in a key", "{\"\xc3\":1,\"<K>\":<V>}", `invalid UTF-8 at byte`, false},                           // cut sequence
		{"UTF-8 surrogate", "{\"<K>\":\"\xed\xa0\x80\"}", `invalid UTF-8 at byte`, false},                                // CESU-style
		{"lone high surrogate", `{"<K>":"\ud800"}`, `lone surrogate \ud800`, false},                                      // no low half
		{"lone low surrogate", `{"<K>":"x\uDC00"}`, `lone surrogate \uDC00`, false},                                      // no high half
		{"high then not low", `{"<K>":"\ud800\u0041"}`, `lone surrogate \ud800`, false},                                  // broken pair
		{"high at the end of a key", `{"<K>":<V>,"a\udbff":1}`, `lone surrogate \udbff at byte`, false},                  // in a key
		{"unknown key", `{"<K>":<V>,"shell":"zsh"}`, `unknown key "shell" at byte`, false},                               // not in the contract
		{"env key case", `{"<K>":<V>,"ENV":{"A":"1"}}`, `key "ENV" at byte`, true},                                       // a nested object's parent
		{"duplicate deep in env value", `{"<K>":<V>,"env":{"A":"1","B":"2","B":"3"}}`, `duplicate key "B" in env`, true}, // any member
	}
	for _, ep := range endpoints {
		for _, tt := range tests {
			if tt.env && !ep.env {
				continue
			}
			upper := strings.ToUpper(ep.key[:1]) + ep.key[1:]
			escaped := fmt.Sprintf(`\u%04x`, ep.key[0]) + ep.key[1:]
			r := strings.NewReplacer("<UK>", upper, "<EK>", escaped, "<K>", ep.key, "<V>", ep.val)
			body := r.Replace(tt.body)
			body = "{" + ep.extra + body[1:]
			want := r.Replace(tt.want)
			if ep.name == "mcp http bash" {
				// strictBody checks the whole message first (its paths start
				// at params.arguments, its offsets at the message), the tool
				// call's check the rest: compare what precedes both.
				want, _, _ = strings.Cut(want, " in ")
				want, _, _ = strings.Cut(want, " at byte")
			}
			var code, msg string
			switch ep.name {
			case "mcp http bash":
				code, msg = mcpHTTPCall(t, e, api.ToolBash, body)
			case "mcp bash", "mcp read_output":
				res := callRaw(t, cs, strings.TrimPrefix(ep.name, "mcp "), body)
				code, msg, _ = strings.Cut(toolText(res), ": ")
				if !res.IsError {
					code = ""
				}
			default:
				status, b := e.do(context.Background(), "POST", ep.name, body)
				d := errorBody(t, b)
				code, msg = d.Code, d.Message
				if status != http.StatusBadRequest {
					t.Errorf("%s %s: status %d, want 400", ep.name, tt.name, status)
				}
			}
			if code != api.CodeInvalidArgument || !strings.Contains(msg, want) {
				t.Errorf("%s %s: %s\n got %s %q\nwant INVALID_ARGUMENT containing %q", ep.name, tt.name, body, code, msg, want)
			}
		}
	}
	if _, err := os.Stat(started); err == nil {
		t.Errorf("a refused request ran its command")
	}

	// Controls: a surrogate pair and an escaped key alone are valid and mean
	// what encoding/json reads.
	res := e.exec(`{"\u0063ommand":"printf '%s' \"\ud83d\ude00\""}`)
	if res.Stdout != "😀" {
		t.Errorf("escaped key and surrogate pair: stdout %q", res.Stdout)
	}
	if r := callRaw(t, cs, api.ToolBash, `{"command":"printf '%s' \"\ud83d\ude00\""}`); r.IsError || !strings.HasPrefix(toolText(r), "😀") {
		t.Errorf("MCP surrogate pair: %q", toolText(r))
	}
}

// TestUnroutedErrors: 404 and 405, of the routes and of /mcp, are the
// error JSON with the right code, not ServeMux's or the MCP SDK's plain
// text.
func TestUnroutedErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mcpHdr := []string{"Accept", "application/json, text/event-stream"}
	tests := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code, msg, allow         string
	}{
		{"no route", "GET", "/nope", "", nil, 404, api.CodeNotFound, "no route for GET /nope", ""},                                                                // unknown path
		{"under v1", "POST", "/v1/exec/x", "{}", nil, 404, api.CodeNotFound, "no route for POST /v1/exec/x", ""},                                                  // below a route
		{"below mcp", "POST", "/mcp/x", "{}", mcpHdr, 404, api.CodeNotFound, "no route for POST /mcp/x", ""},                                                      // /mcp is exact
		{"wrong method", "GET", "/v1/exec", "", nil, 405, api.CodeInvalidArgument, "method GET is not allowed on /v1/exec; allowed: POST", "POST"},                // ServeMux's 405
		{"wrong method on read", "PUT", "/v1/read", "{}", nil, 405, api.CodeInvalidArgument, "method PUT is not allowed on /v1/read", "POST"},                     // another route
		{"mcp GET", "GET", "/mcp", "", mcpHdr, 400, api.CodeInvalidArgument, "GET requires an Mcp-Session-Id header", ""},                                         // the SDK's refusal of a stream without a session
		{"mcp content type", "POST", "/mcp", "{}", []string{"Content-Type", "text/plain", "Accept", mcpHdr[1]}, 415, api.CodeInvalidArgument, "Content-Type", ""}, // the SDK's 415
		{"unknown job", "GET", "/v1/jobs/j-nope/output", "", nil, 404, api.CodeNotFound, `no job "j-nope"`, ""},                                                   // a handler's own 404
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := e.send(context.Background(), tt.method, tt.path, tt.body, tt.hdr...)
			defer resp.Body.Close()
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			d := errorBody(t, b.Bytes())
			if resp.StatusCode != tt.status || d.Code != tt.code || !strings.Contains(d.Message, tt.msg) {
				t.Errorf("%d %+v, want %d %s containing %q", resp.StatusCode, d, tt.status, tt.code, tt.msg)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if allow := resp.Header.Get("Allow"); tt.allow != "" && allow != tt.allow {
				t.Errorf("Allow %q, want %q", allow, tt.allow)
			}
		})
	}
}

// TestArgSizeLimit: a command or environment the kernel refuses to exec for
// its size (E2BIG) is INVALID_ARGUMENT naming the limit, over HTTP (which
// takes 1 MiB bodies: one argument over Linux's 128 KiB MAX_ARG_STRLEN) and
// over MCP (a 3 MB command), and nothing runs.
func TestArgSizeLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MAX_ARG_STRLEN is Linux's")
	}
	t.Parallel()
	e := newEnv(t)
	cs := inMemoryMCP(t, e)
	started := filepath.Join(t.TempDir(), "started")
	big := "touch " + started + "; : " + strings.Repeat("x", 200<<10)
	const want = "exceed the kernel's argument size limit"
	for _, tt := range []struct{ name, path, body string }{
		{"exec command", "/v1/exec", `{"command":` + jsonString(big) + `}`},                                                               // one argument
		{"exec env", "/v1/exec", `{"command":` + jsonString("touch "+started) + `,"env":{"BIG":"` + strings.Repeat("x", 200<<10) + `"}}`}, // one variable
		{"job command", "/v1/jobs", `{"command":` + jsonString(big) + `}`},                                                                // a job starts the same way
	} {
		code, b := e.do(context.Background(), "POST", tt.path, tt.body)
		d := errorBody(t, b)
		if code != http.StatusBadRequest || d.Code != api.CodeInvalidArgument || !strings.Contains(d.Message, want) || !strings.Contains(d.Message, "MAX_ARG_STRLEN") {
			t.Errorf("%s: %d %+v", tt.name, code, d)
		}
	}
	r := callRaw(t, cs, api.ToolBash, `{"command":`+jsonString(big+strings.Repeat("y", 3<<20))+`}`)
	if text := toolText(r); !r.IsError || !strings.HasPrefix(text, api.CodeInvalidArgument+": the command (") || !strings.Contains(text, want) {
		t.Errorf("MCP 3 MB command: %.300s", text)
	}
	if _, err := os.Stat(started); err == nil {
		t.Errorf("a refused command ran")
	}
}

// TestWireMessages: no error message on the wire carries a Go package
// prefix ("supervisor: invalid request: ..."), over HTTP or MCP.
func TestWireMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := inMemoryMCP(t, e)
	bin := filepath.Join(e.data, "scratch", "s1", "tool-output", "bin.log")
	os.MkdirAll(filepath.Dir(bin), 0o700)
	os.WriteFile(bin, []byte("a\x00b\n"), 0o600)
	running := e.startJob(`{"command":"sleep 30"}`).ID
	defer e.kill(running)
	prefixes := []string{"supervisor:", "api:", "spill:", "budget:", "killtree:", "json:", "journal:"}
	check := func(what, msg string) {
		t.Helper()
		for _, p := range prefixes {
			if strings.Contains(msg, p) {
				t.Errorf("%s: message %q carries %q", what, msg, p)
			}
		}
	}
	for _, rq := range []struct{ method, path, body string }{
		{"POST", "/v1/exec", `{"command":"true","timeout":301}`},
		{"POST", "/v1/exec", `{"command":""}`},
		{"POST", "/v1/exec", `{"command":"a\u0000"}`},
		{"POST", "/v1/exec", `{"command":"true","session":"../x"}`},
		{"POST", "/v1/exec", `{"command":"true","label":"a/b"}`},
		{"POST", "/v1/exec", `{"command":"true","stdoutPolicy":"middle"}`},
		{"POST", "/v1/exec", `{"command":"true","cwd":"/nonexistent/corral"}`},
		{"POST", "/v1/exec", `{"command":"true","env":{"A=B":"1"}}`},
		{"POST", "/v1/exec", `{"command":"true","shell":"zsh"}`},
		{"POST", "/v1/exec", `{"command":`},
		{"POST", "/v1/exec", `{"command":1}`},
		{"POST", "/v1/exec", `{"command":"true","command":"true"}`},
		{"POST", "/v1/exec", `{"command":"` + strings.Repeat("x", 1<<20) + `"}`},
		{"POST", "/v1/exec", `{"command":"` + strings.Repeat("x", 200<<10) + `"}`},
		{"POST", "/v1/jobs", `{"command":"true","lifetime":0}`},
		{"POST", "/v1/jobs", `{"command":"true","interactive":true,"stdin":"x"}`},
		{"GET", "/v1/jobs/j-nope/output", ""},
		{"GET", "/v1/jobs/" + running + "/output?after=x", ""},
		{"GET", "/v1/jobs/" + running + "/output?stream=stdin", ""},
		{"POST", "/v1/jobs/j-nope/wait", ""},
		{"POST", "/v1/jobs/" + running + "/wait?timeout=0", ""},
		{"POST", "/v1/jobs/" + running + "/wait?timeout=0.1", ""},
		{"POST", "/v1/jobs/" + running + "/stdin", "x"},
		{"DELETE", "/v1/jobs/j-nope", ""},
		{"POST", "/v1/read", `{"path":"nope.log"}`},
		{"POST", "/v1/read", `{"path":` + jsonString(bin) + `}`},
		{"POST", "/v1/read", `{"path":` + jsonString(bin) + `,"offset":-1}`},
		{"POST", "/v1/grep", `{"path":"nope.log","pattern":"("}`},
		{"POST", "/v1/grep", `{"path":` + jsonString(bin) + `,"pattern":"a"}`},
		{"DELETE", "/v1/sessions/" + strings.Repeat("x", 129), ""},
		{"GET", "/nope", ""},
		{"GET", "/v1/exec", ""},
	} {
		code, b := e.do(context.Background(), rq.method, rq.path, rq.body)
		what := fmt.Sprintf("%s %s %.80s (%d)", rq.method, rq.path, rq.body, code)
		if code < 400 {
			t.Errorf("%s: not refused: %.200s", what, b)
			continue
		}
		check(what, errorBody(t, b).Message)
	}
	for _, c := range []struct{ tool, args string }{
		{api.ToolBash, `{"command":"true","timeout":301}`},
		{api.ToolBash, `{"command":"true","lifetime":5}`},
		{api.ToolBash, `{"command":""}`},
		{api.ToolJobOutput, `{"id":"j-nope"}`},
		{api.ToolJobInput, `{"id":"` + running + `","data":"x"}`},
		{api.ToolJobKill, `{"id":"j-nope"}`},
		{api.ToolReadOutput, `{"path":"nope.log"}`},
		{api.ToolGrepOutput, `{"path":` + jsonString(bin) + `,"pattern":"a"}`},
	} {
		r := callRaw(t, cs, c.tool, c.args)
		what := c.tool + " " + c.args
		if !r.IsError {
			t.Errorf("%s: not refused: %s", what, toolText(r))
		}
		check(what, toolText(r))
	}
}
