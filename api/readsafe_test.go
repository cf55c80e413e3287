package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
)

// TestNoHTMLEscaping: text a model or a client reads keeps <, > and & as
// they are, in every HTTP body, NDJSON line and MCP tool text.
func TestNoHTMLEscaping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const text = `<div>a && b</div>`
	escaped := []string{`\u003c`, `\u003e`, `\u0026`}
	check := func(where, body string) {
		t.Helper()
		if !strings.Contains(body, text) {
			t.Errorf("%s: %q not found as it is in %.300s", where, text, body)
		}
		for _, esc := range escaped {
			if strings.Contains(body, esc) {
				t.Errorf("%s: HTML-escaped %s in %.300s", where, esc, body)
			}
		}
	}
	cmd := jsonString(`echo '` + text + `'; seq 100000`)
	code, b := e.do(context.Background(), "POST", "/v1/exec", `{"command":`+cmd+`,"session":"html"}`)
	if code != 200 {
		t.Fatalf("exec: %d %s", code, b)
	}
	check("exec", string(b))
	var res struct {
		StdoutInfo struct{ SpillPath string } `json:"stdoutInfo"`
	}
	json.Unmarshal(b, &res)
	_, b = e.do(context.Background(), "POST", "/v1/exec", `{"command":`+cmd+`}`, "Accept", "application/x-ndjson")
	check("ndjson", string(b))
	_, b = e.do(context.Background(), "POST", "/v1/grep", `{"path":`+jsonString(res.StdoutInfo.SpillPath)+`,"pattern":"div"}`)
	check("grep", string(b))
	_, b = e.do(context.Background(), "POST", "/v1/read", `{"path":`+jsonString(res.StdoutInfo.SpillPath)+`,"limit":1}`)
	check("read", string(b))
	_, marker := proctest.Marker(t)
	job := e.startJob(`{"command":` + jsonString(marked(marker, "sleep 30 # "+text)) + `}`)
	_, b = e.do(context.Background(), "GET", "/v1/jobs", "")
	check("GET /v1/jobs", string(b))

	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := newMCPClient().Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: e.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		tool string
		args any
	}{
		{api.ToolGrepOutput, map[string]any{"path": res.StdoutInfo.SpillPath, "pattern": "div"}},
		{api.ToolReadOutput, map[string]any{"path": res.StdoutInfo.SpillPath, "limit": 1}},
		{"job_list", map[string]any{}},
		{api.ToolBash, map[string]any{"command": "echo '" + text + "'"}},
	} {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil || r.IsError {
			t.Fatalf("%s: %v %s", c.tool, err, toolText(r))
		}
		check("MCP "+c.tool, toolText(r))
	}
	e.do(context.Background(), "DELETE", "/v1/jobs/"+job.ID, "")
}

// TestReadGrepPartial: a spill that stopped at the 512 KiB cap says so on
// every read and grep (partial, and how much of the stream it holds); one
// that holds its whole stream says nothing of the kind.
func TestReadGrepPartial(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := e.exec(`{"command":"seq 1000000","session":"p"}`).StdoutInfo
	small := e.exec(`{"command":"seq 20000","session":"p"}`).StdoutInfo
	if big.SpillPath == "" || small.SpillPath == "" {
		t.Fatalf("no spill: %+v %+v", big, small)
	}
	type result struct {
		Partial bool   `json:"partial"`
		Notice  string `json:"notice"`
	}
	want := fmt.Sprintf("this file holds the first 524288 of %d bytes", big.TotalBytes)
	for _, tt := range []struct {
		path    string
		partial bool
	}{{big.SpillPath, true}, {small.SpillPath, false}} {
		for _, req := range []struct{ ep, body string }{
			{"/v1/read", `{"path":` + jsonString(tt.path) + `,"limit":2}`},
			{"/v1/grep", `{"path":` + jsonString(tt.path) + `,"pattern":"^7$"}`},
		} {
			code, b := e.do(context.Background(), "POST", req.ep, req.body)
			var r result
			if err := json.Unmarshal(b, &r); err != nil || code != 200 {
				t.Fatalf("%s: %d %v %s", req.ep, code, err, b)
			}
			if r.Partial != tt.partial || strings.Contains(r.Notice, want) != tt.partial || !tt.partial && strings.Contains(string(b), "partial") {
				t.Errorf("%s of the %v spill: %s", req.ep, map[bool]string{true: "capped", false: "whole"}[tt.partial], b)
			}
		}
	}
}

// readBody is the body of a read or grep of path (grep looks for "root").
func readBody(ep, path string) string {
	if ep == "/v1/grep" {
		return `{"path":` + jsonString(path) + `,"pattern":"root"}`
	}
	return `{"path":` + jsonString(path) + `}`
}

// TestReadGrepSwappedSessionDir: a command replaces its session directory
// with a symlink to / and plants a symlink as a spill file: read and grep
// of any path through them get an error, never host content.
func TestReadGrepSwappedSessionDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.exec(`{"command":"seq 100000","session":"victim"}`)
	name := filepath.Base(res.StdoutInfo.SpillPath)
	sess := filepath.Join(e.data, "scratch", "victim")
	res = e.exec(`{"command":` + jsonString(fmt.Sprintf(
		"rm -rf %[1]q && ln -s / %[1]q && mkdir -p %[2]q && ln -s /etc/passwd %[2]q/%[3]s",
		sess, filepath.Join(e.data, "scratch", "planted", "tool-output"), name)) + `}`)
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("swap: %+v", res)
	}
	paths := []string{
		filepath.Join(sess, "etc", "passwd"),                             // through the swapped dir
		"scratch/victim/etc/passwd",                                      // the same, relative
		filepath.Join(sess, "tool-output", name),                         // the spill name, now under /
		"scratch/victim/../../../../etc/passwd",                          // climbing out
		"../../etc/passwd",                                               // climbing out, shorter
		filepath.Join(e.data, "scratch", "planted", "tool-output", name), // a symlink as the spill file
	}
	for _, p := range paths {
		for _, ep := range []string{"/v1/read", "/v1/grep"} {
			code, b := e.do(context.Background(), "POST", ep, readBody(ep, p))
			if code == 200 || strings.Contains(string(b), "root:") {
				t.Errorf("%s %s: %d %s", ep, p, code, b)
			}
			if code != 404 || errorCode(t, b) != api.CodeNotFound {
				t.Errorf("%s %s: %d %s, want 404 NOT_FOUND", ep, p, code, b)
			}
		}
	}
}

// TestReadDataDirSwapped: the data directory itself renamed away and
// replaced by a symlink to / after start: reads of host paths through it
// fail, and the spill written before reads back from the original.
func TestReadDataDirSwapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spill := e.exec(`{"command":"seq 100000","session":"s"}`).StdoutInfo.SpillPath
	moved := e.data + "-moved"
	if err := os.Rename(e.data, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", e.data); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(e.data); os.Rename(moved, e.data) })
	for _, p := range []string{filepath.Join(e.data, "etc", "passwd"), filepath.Join(e.data, "scratch", "..", "etc", "passwd"), "etc/passwd"} {
		for _, ep := range []string{"/v1/read", "/v1/grep"} {
			code, b := e.do(context.Background(), "POST", ep, readBody(ep, p))
			if code != 404 || strings.Contains(string(b), "root:") {
				t.Errorf("%s %s after the swap: %d %s", ep, p, code, b)
			}
		}
	}
	code, b := e.do(context.Background(), "POST", "/v1/read", `{"path":`+jsonString(spill)+`,"limit":1}`)
	if code != 200 || !strings.Contains(string(b), `"content":"1\n"`) {
		t.Errorf("the spill after the swap: %d %s", code, b)
	}
}
