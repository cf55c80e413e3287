package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// TestHTTPTerminal: a job on a terminal through the HTTP API: its status
// (GET /v1/jobs/{id}) says tty and waiting, stdin?yield returns at the next
// wait, resize reaches the program, the screen shows what it drew, and the
// status of an exited job carries its Result.
func TestHTTPTerminal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waiting is detected on Linux")
	}
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st := e.startJob(`{"command": ` + jsonString(marked(marker, `read -p "name? " x; stty size; read -p "again? " y; echo "bye $x"`)) +
		`, "tty": {"cols": 70, "rows": 20}}`)
	var status supervisor.JobStatus
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		code, b := e.do(context.Background(), "GET", "/v1/jobs/"+st.ID, "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/jobs/%s: %d %s", st.ID, code, b)
		}
		status = supervisor.JobStatus{}
		json.Unmarshal(b, &status)
		if status.Waiting != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status.Waiting == nil || status.Waiting.Prompt != "name?" || status.Waiting.Kind != "line" ||
		status.TTY == nil || *status.TTY != (supervisor.TTYSize{Cols: 70, Rows: 20}) || status.Result != nil {
		t.Fatalf("status %+v", status)
	}
	if code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/resize", `{"cols": 90, "rows": 33}`); code != http.StatusNoContent {
		t.Fatalf("resize: %d %s", code, b)
	}
	code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin?yield=20", "ann\r")
	var out supervisor.JobOutput
	if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil || out.Waiting == nil ||
		out.Waiting.Prompt != "again?" || !strings.Contains(out.Data, "33 90") {
		t.Fatalf("stdin?yield: %d %s", code, b)
	}
	code, b = e.do(context.Background(), "GET", "/v1/jobs/"+st.ID+"/screen", "")
	var sc supervisor.Screen
	if err := json.Unmarshal(b, &sc); code != http.StatusOK || err != nil || sc.Cols != 90 || sc.Rows != 33 ||
		sc.Lines[0] != "name? ann" || sc.Lines[2] != "again?" || sc.Cursor != (supervisor.Cursor{Row: 2, Col: 7}) {
		t.Fatalf("screen: %d %s", code, b)
	}
	e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin", "\r")
	res := e.wait(st.ID)
	code, b = e.do(context.Background(), "GET", "/v1/jobs/"+st.ID, "")
	status = supervisor.JobStatus{}
	json.Unmarshal(b, &status)
	if code != http.StatusOK || status.State != "exited" || status.Waiting != nil || status.Result == nil ||
		*status.Result.ExitCode != 0 || !strings.Contains(res.Stdout, "bye ann") || res.Stderr != "" {
		t.Fatalf("exited status: %d %s; result %+v", code, b, res)
	}
	// A pipe job has no screen to show or resize.
	pipe := e.startJob(`{"command": ` + jsonString(marked(marker, "sleep 30")) + `}`)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/jobs/" + pipe.ID + "/screen", ""},
		{"POST", "/v1/jobs/" + pipe.ID + "/resize", `{"cols": 10, "rows": 10}`},
		{"POST", "/v1/jobs/" + st.ID + "/resize", `{"cols": 0, "rows": 10}`},
	} {
		if code, b := e.do(context.Background(), tc.method, tc.path, tc.body); code != http.StatusBadRequest ||
			errorCode(t, b) != "INVALID_ARGUMENT" {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, code, b)
		}
	}
	if code, _ := e.do(context.Background(), "GET", "/v1/jobs/j-nope", ""); code != http.StatusNotFound {
		t.Errorf("GET an unknown job: %d", code)
	}
}

// TestExecYieldWaiting: /v1/exec with tty and yield streams a waiting event
// and returns, long before the yield, a running Result that names the wait.
func TestExecYieldWaiting(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waiting is detected on Linux")
	}
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	begin := time.Now()
	resp := e.send(context.Background(), "POST", "/v1/exec", `{"command": `+jsonString(marked(marker, `printf 'Continue? [Y/n] '; read a`))+
		`, "tty": {}, "yield": 100, "timeout": 200}`, "Accept", "application/x-ndjson")
	defer resp.Body.Close()
	var waited *supervisor.Waiting
	var res *supervisor.Result
	events(t, resp.Body, func(_ []byte, ev supervisor.Event) bool {
		switch ev.Event {
		case supervisor.EventWaiting:
			waited = ev.Waiting
		case supervisor.EventResult:
			res = ev.Result
			return false
		}
		return true
	})
	if waited == nil || waited.Prompt != "Continue? [Y/n]" || res == nil || !res.Running || res.Waiting == nil ||
		time.Since(begin) > 60*time.Second {
		t.Fatalf("waiting %+v, result %+v after %v", waited, res, time.Since(begin))
	}
	e.do(context.Background(), "DELETE", "/v1/jobs/"+res.JobID, "")
}

// TestMCPBashTTY: MCP bash with tty and yield returns at the wait, job_input
// answers it, job_screen shows the terminal.
func TestMCPBashTTY(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waiting is detected on Linux")
	}
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := newMCPClient().Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: e.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, marker := proctest.Marker(t)
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": marked(marker, `read -s -p "Password: " p; echo; echo "len ${#p}"`), "tty": true, "cols": 60, "yield": 100, "timeout": 200}})
	if err != nil {
		t.Fatal(err)
	}
	var res supervisor.Result
	structured(t, r, &res)
	if !res.Running || res.Waiting == nil || res.Waiting.Kind != "password" || !strings.Contains(toolText(r), "waiting for input") {
		t.Fatalf("bash tty yield: %s", toolText(r))
	}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_screen", Arguments: map[string]any{"id": res.JobID}})
	var sc supervisor.Screen
	structured(t, r, &sc)
	if sc.Cols != 60 || sc.Rows != 40 || sc.Lines[0] != "Password:" {
		t.Errorf("job_screen: %+v", sc)
	}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_input", Arguments: map[string]any{"id": res.JobID, "chars": "abc\r", "yield": 20}})
	// The job's id is hex and can hold "abc" itself (CI saw j-57d5be3abc…).
	if text := toolText(r); !strings.Contains(text, "len 3") || strings.Contains(strings.ReplaceAll(text, res.JobID, ""), "abc") {
		t.Errorf("job_input: %s", text)
	}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true", "cols": 10}})
	if !r.IsError || !strings.Contains(toolText(r), "need tty: true") {
		t.Errorf("cols without tty: %s", toolText(r))
	}
}

// TestBatchTTY: a batch item with tty runs on a terminal of its size, the
// others on pipes.
func TestBatchTTY(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, b := e.do(context.Background(), "POST", "/v1/batch",
		`{"requests":[{"command":"stty size","tty":{"cols":33,"rows":11}},{"command":"stty size 2>&1; true"}]}`)
	var res supervisor.BatchResult
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil || len(res.Results) != 2 {
		t.Fatalf("batch: %d %s", code, b)
	}
	if got := res.Results[0].Stdout; got != "11 33\n" {
		t.Errorf("the tty item: stdout %q", got)
	}
	if got := res.Results[1].Stdout; !strings.Contains(got, "stty:") {
		t.Errorf("the pipe item: stdout %q, want stty's complaint that stdin is no terminal", got)
	}
}

// TestMCPInteractiveYieldWaiting: MCP bash with interactive and yield
// returns as soon as the command waits for input, on a pipe and on a
// terminal, with the wait in its Result and text; job_wait on a job that
// waits says so when its timeout passes.
func TestMCPInteractiveYieldWaiting(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waiting is detected on Linux")
	}
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := newMCPClient().Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: e.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// job_input's yield says when it returns: at the next wait, not at an
	// output pause.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == api.ToolJobInput {
			b, _ := json.Marshal(tool.InputSchema)
			if !strings.Contains(string(b), "as soon as the job waits for input again") || strings.Contains(string(b), "100 ms") {
				t.Errorf("job_input's schema: %s", b)
			}
		}
	}
	_, marker := proctest.Marker(t)
	for _, tty := range []bool{false, true} {
		begin := time.Now()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": marked(marker, `printf 'name? '; read x; echo "hi $x"`), "interactive": true, "tty": tty,
			"yield": 30, "timeout": 200}})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin)
		var res supervisor.Result
		structured(t, r, &res)
		if !res.Running || res.JobID == "" || res.Waiting == nil || res.Waiting.Prompt != "name?" || took > 15*time.Second ||
			!strings.Contains(toolText(r), "waiting for input") || !strings.Contains(res.Stdout, "name?") {
			t.Fatalf("tty %v: bash interactive yield after %v: %s", tty, took, toolText(r))
		}
		r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_wait", Arguments: map[string]any{"id": res.JobID, "timeout": 0.5}})
		var waited supervisor.Result
		structured(t, r, &waited)
		if !waited.Running || waited.Waiting == nil || waited.Waiting.Prompt != "name?" || !strings.Contains(toolText(r), "waiting for input") {
			t.Errorf("tty %v: job_wait: %s", tty, toolText(r))
		}
		cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_input", Arguments: map[string]any{"id": res.JobID, "data": "ann\n"}})
		r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_wait", Arguments: map[string]any{"id": res.JobID, "timeout": 30}})
		var final supervisor.Result
		structured(t, r, &final)
		if final.Running || final.Waiting != nil || !strings.Contains(final.Stdout, "hi ann") {
			t.Errorf("tty %v: job_wait after the answer: %s", tty, toolText(r))
		}
	}
}

// TestMCPScreenViews: a full-screen program's yield, job_input and
// job_output texts show its screen, not the escape sequences that drew it;
// the structured job_input and stdin?yield reads keep the bytes in data and
// carry the screen.
func TestMCPScreenViews(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waiting is detected on Linux")
	}
	if _, err := exec.LookPath("vi"); err != nil {
		t.Skip("vi is not installed (.ci/run installs vim-tiny)")
	}
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := newMCPClient().Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: e.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, marker := proctest.Marker(t)
	file := filepath.Join(t.TempDir(), "f.txt")
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": marked(marker, "vi "+file), "tty": true, "cols": 80, "rows": 24, "yield": 30, "timeout": 200}})
	if err != nil {
		t.Fatal(err)
	}
	var res supervisor.Result
	structured(t, r, &res)
	if !res.Running || res.Waiting == nil || strings.Contains(toolText(r), "\x1b[") || !strings.Contains(toolText(r), "~") {
		t.Fatalf("bash vi yield: %q", toolText(r))
	}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_input", Arguments: map[string]any{"id": res.JobID, "chars": "ihello\u001b", "yield": 20}})
	var in api.JobInputResult
	structured(t, r, &in)
	text := toolText(r)
	if in.Output == nil || in.Output.Screen == nil || in.Output.Screen.Lines[0] != "hello" || !strings.Contains(in.Output.Data, "\x1b[") ||
		strings.Contains(text, "\x1b[") || !strings.Contains(text, "alternate screen") || !strings.Contains(text, "\nhello\n") {
		t.Errorf("job_input yield: %q, structured %+v", text, in.Output)
	}
	code, b := e.do(ctx, "POST", "/v1/jobs/"+res.JobID+"/stdin?yield=20", "ddiagain\x1b")
	var out supervisor.JobOutput
	if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil || out.Screen == nil || out.Screen.Lines[0] != "again" {
		t.Errorf("stdin?yield: %d %s", code, b)
	}
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_input", Arguments: map[string]any{"id": res.JobID, "chars": ":q!\r"}})
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_wait", Arguments: map[string]any{"id": res.JobID, "timeout": 30}})
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_output", Arguments: map[string]any{"id": res.JobID, "after": 0}})
	if text := toolText(r); strings.Contains(text, "\x1b[") || !strings.Contains(text, "exited") {
		t.Errorf("job_output of the exited vi: %q", text)
	}
}
