package api_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// mcpCaller connects a go-sdk client to e's /mcp at protocol version (""
// for the SDK's latest) and returns a function that calls a tool and fails
// the test on a protocol error.
func mcpCaller(t *testing.T, e *env, version string) func(name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx := context.Background()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := newMCPClient().Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: e.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{e.token, tr}}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
}

// TestMCPSessionState: each MCP session is its own corral session (state
// carries within it and not to another); restart resets it; a protocol
// without sessions carries state only for a named session.
func TestMCPSessionState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	a := mcpCaller(t, e, "2025-11-25")
	b := mcpCaller(t, e, "2025-11-25")

	var res supervisor.Result
	r := a(api.ToolBash, map[string]any{"command": "cd " + dir + " && export A=1"})
	structured(t, r, &res)
	if res.Cwd != dir || !strings.Contains(toolText(r), "; cwd "+dir+"]") {
		t.Errorf("first call: cwd %q, text %q", res.Cwd, toolText(r))
	}
	r = a(api.ToolBash, map[string]any{"command": `pwd; printf '%s\n' "${A-unset}"`})
	if want := dir + "\n1\n"; !strings.HasPrefix(toolText(r), want) {
		t.Errorf("the same MCP session: %q, want it to start with %q", toolText(r), want)
	}
	r = b(api.ToolBash, map[string]any{"command": `printf '%s\n' "${A-unset}"`})
	if !strings.HasPrefix(toolText(r), "unset\n") {
		t.Errorf("another MCP session sees the state: %q", toolText(r))
	}
	r = a(api.ToolBash, map[string]any{"restart": true, "command": `printf '%s\n' "${A-unset}"`})
	if !strings.HasPrefix(toolText(r), "unset\n") {
		t.Errorf("after restart: %q", toolText(r))
	}

	// The SDK's latest protocol has no MCP session: stateless, unless the
	// call names a session.
	c := mcpCaller(t, e, "")
	c(api.ToolBash, map[string]any{"command": "export C=1"})
	if r := c(api.ToolBash, map[string]any{"command": `printf '%s\n' "${C-unset}"`}); !strings.HasPrefix(toolText(r), "unset\n") {
		t.Errorf("a sessionless protocol carried state: %q", toolText(r))
	}
	c(api.ToolBash, map[string]any{"session": "named", "command": "export C=2"})
	if r := c(api.ToolBash, map[string]any{"session": "named", "command": `printf '%s\n' "${C-unset}"`}); !strings.HasPrefix(toolText(r), "2\n") {
		t.Errorf("a named session did not carry state: %q", toolText(r))
	}
}

// TestMCPYieldAndTurns: bash with yield hands a running command over as a
// job that job_output reads without a cursor; job_input with yield returns
// an interactive program's answer in the same call.
func TestMCPYieldAndTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	call := mcpCaller(t, e, "2025-11-25")

	var res supervisor.Result
	r := call(api.ToolBash, map[string]any{"yield": 0.5,
		"command": marked(marker, "echo first; sleep 1; echo second")})
	structured(t, r, &res)
	if !res.Running || res.JobID == "" || !strings.Contains(toolText(r), "still running") ||
		!strings.Contains(toolText(r), res.JobID) || !strings.HasPrefix(res.Stdout, "first\n") {
		t.Fatalf("yield: %+v\n%s", res, toolText(r))
	}
	var out supervisor.JobOutput
	structured(t, call(api.ToolJobOutput, map[string]any{"id": res.JobID, "wait": 10}), &out)
	if out.Data != "second\n" {
		t.Errorf("cursorless job_output after the yield: %q, want only what came after it", out.Data)
	}

	var st supervisor.JobStarted
	structured(t, call(api.ToolBash, map[string]any{"background": true, "interactive": true,
		"command": marked(marker, `while read -r l; do echo "got $l"; done`)}), &st)
	defer call(api.ToolJobKill, map[string]any{"id": st.ID})
	for _, line := range []string{"one", "two", "three"} {
		var in api.JobInputResult
		r := call(api.ToolJobInput, map[string]any{"id": st.ID, "data": line + "\n", "yield": 20})
		structured(t, r, &in)
		if in.Output == nil || in.Output.Data != "got "+line+"\n" || !strings.HasPrefix(toolText(r), "got "+line+"\n") {
			t.Errorf("job_input %q with yield: %+v %q", line, in.Output, toolText(r))
		}
	}
}
