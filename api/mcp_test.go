package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// mcpClient is a go-sdk client that routes progress notifications to the
// call that asked for them, by progress token.
type mcpClient struct {
	*mcp.Client
	mu       sync.Mutex
	progress map[string]chan *mcp.ProgressNotificationParams // guarded by mu
}

func newMCPClient() *mcpClient {
	c := &mcpClient{progress: map[string]chan *mcp.ProgressNotificationParams{}}
	c.Client = mcp.NewClient(&mcp.Implementation{Name: "corral-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			tok, _ := r.Params.ProgressToken.(string)
			c.mu.Lock()
			ch := c.progress[tok]
			c.mu.Unlock()
			if ch != nil {
				select {
				case ch <- r.Params:
				default: // the test stopped listening
				}
			}
		},
	})
	return c
}

// watch returns the channel that receives the progress of token.
func (c *mcpClient) watch(token string) chan *mcp.ProgressNotificationParams {
	ch := make(chan *mcp.ProgressNotificationParams, 1024)
	c.mu.Lock()
	c.progress[token] = ch
	c.mu.Unlock()
	return ch
}

// bashResult decodes a bash tool result's structured content.
func bashResult(t *testing.T, r *mcp.CallToolResult) (supervisor.Result, string) {
	t.Helper()
	if r.IsError {
		t.Fatalf("tool error: %s", toolText(r))
	}
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var res supervisor.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return res, toolText(r)
}

func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// checkMCP runs the MCP acceptance checks over one client session.
func checkMCP(t *testing.T, c *mcpClient, cs *mcp.ClientSession) {
	ctx := context.Background()
	call := func(name string, args any) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}

	// The tools and the numbers in their descriptions (spec §2).
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	desc := map[string]string{}
	for _, tool := range tools.Tools {
		desc[tool.Name] = tool.Description
	}
	wants := map[string][]string{
		api.ToolBash:       {"60 by default", "1–300", "96 KiB", "4,000 lines", "head", "tail", "512 KiB", "read_output", "grep_output"},
		api.ToolReadOutput: {"offset", "limit", "2,000", "48 KiB", "2,000 characters", "TOOL_BINARY_CONTENT"},
		api.ToolGrepOutput: {"headLimit", "200", "truncated: true", "2,000 characters"},
	}
	for name, ws := range wants {
		d, ok := desc[name]
		if !ok {
			t.Errorf("tool %s not listed: %v", name, desc)
		}
		for _, w := range ws {
			if !strings.Contains(d, w) {
				t.Errorf("%s description lacks %q:\n%s", name, w, d)
			}
		}
	}

	// A command: the model view, the status line and the structured Result.
	res, text := bashResult(t, call(api.ToolBash, map[string]any{"command": "echo hi; echo oops >&2; exit 2"}))
	if res.ExitCode == nil || *res.ExitCode != 2 || res.Stdout != "hi\n" || res.Stderr != "oops\n" {
		t.Errorf("bash result %+v", res)
	}
	if !strings.HasPrefix(text, "hi\n[stderr]\noops\n[exit code 2 after ") {
		t.Errorf("bash text %q", text)
	}
	// A bad argument is a tool error naming the code.
	r := call(api.ToolBash, map[string]any{"command": "true", "timeout": 301})
	if !r.IsError || !strings.HasPrefix(toolText(r), api.CodeInvalidArgument) {
		t.Errorf("timeout 301: error %v, text %q", r.IsError, toolText(r))
	}

	// Progress carries the live output, per stream.
	prog := c.watch("p-live")
	params := &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{"command": "echo one; echo two >&2"}}
	params.SetProgressToken("p-live")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	timeout := time.After(10 * time.Second)
	for got["stdout"] != "one\n" || got["stderr"] != "two\n" {
		select {
		case p := <-prog:
			s, _ := p.Meta["stream"].(string)
			got[s] += p.Message
		case <-timeout:
			t.Fatalf("progress so far %q, want one on stdout and two on stderr", got)
		}
	}

	// Cancelling the call in the middle kills the tree.
	_, marker := proctest.Marker(t)
	prog = c.watch("p-cancel")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	params = &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{
		"command": marked(marker, "sleep 60 & sleep 60 & echo ready; wait")}}
	params.SetProgressToken("p-cancel")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, params)
		done <- err
	}()
	select {
	case p := <-prog:
		if p.Message != "ready\n" {
			t.Errorf("progress %q, want ready", p.Message)
		}
	case err := <-done:
		t.Fatalf("the call returned before any progress: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no progress from the running command")
	}
	waitFor(t, 30*time.Second, func() bool { return len(proctest.Survivors(marker)) >= 2 })
	cancel()
	if err := <-done; err == nil {
		t.Error("the cancelled call returned no error")
	}
	proctest.NoSurvivors(t, marker, time.Second)

	// A cut result names its spill file; read_output and grep_output read it.
	res, text = bashResult(t, call(api.ToolBash, map[string]any{"command": "seq 100000"}))
	spill := res.StdoutInfo.SpillPath
	if !res.Truncated || spill == "" || !strings.Contains(text, spill) {
		t.Fatalf("seq 100000: spill %q, truncated %v", spill, res.Truncated)
	}
	r = call(api.ToolReadOutput, map[string]any{"path": spill, "offset": 5, "limit": 2})
	if r.IsError || !strings.HasPrefix(toolText(r), "5\n6\n[") || !strings.Contains(toolText(r), "7") {
		t.Errorf("read_output: %q (error %v)", toolText(r), r.IsError)
	}
	r = call(api.ToolGrepOutput, map[string]any{"path": spill, "pattern": "^777$"})
	var gr struct {
		Count   int `json:"count"`
		Matches []struct {
			Line int `json:"line"`
		} `json:"matches"`
	}
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &gr); r.IsError || err != nil || gr.Count != 1 || gr.Matches[0].Line != 777 {
		t.Errorf("grep_output: %s %q", b, toolText(r))
	}
	r = call(api.ToolReadOutput, map[string]any{"path": "/etc/passwd"})
	if !r.IsError || !strings.HasPrefix(toolText(r), api.CodeNotFound) {
		t.Errorf("read_output /etc/passwd: error %v, %q", r.IsError, toolText(r))
	}
}

// bearer adds the token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func TestMCPOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withToken(testToken))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := newMCPClient()
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: e.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{testToken, tr}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	checkMCP(t, c, cs)
}

func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the corral binary")
	}
	bin := buildCorral(t)
	data := t.TempDir()
	cmd := exec.Command(bin, "mcp", "--data-dir", data, "--grace", "0.2")
	cmd.Stderr = &lockedBuffer{}
	c := newMCPClient()
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		if s := cmd.Stderr.(*lockedBuffer).String(); s != "" {
			t.Logf("corral mcp stderr:\n%s", s)
		}
	}()
	checkMCP(t, c, cs)
}

// buildCorral builds the corral binary into a temporary directory, with
// the corral-server that corral mcp executes beside it.
func buildCorral(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "corral")
	out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "github.com/corral-sh/corral/cmd/corral", "github.com/corral-sh/corral/cmd/corral-server").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
