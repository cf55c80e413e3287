package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// TestMCPToolShapes: on every face (stdio, HTTP with and without a session)
// every tool has a title, an output schema, an input schema without type
// unions; reads are read-only, kills destructive; bash's description is
// under 800 characters; the server has instructions; and only the
// sessionless face says that state carries only under a named session.
func TestMCPToolShapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	faces := map[string]*mcp.ClientSession{
		"stdio":       inMemoryMCP(t, e),
		"http":        httpClientSession(t, e, "2025-11-25"),
		"sessionless": httpClientSession(t, e, "2026-07-28"),
	}
	for face, cs := range faces {
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res := cs.InitializeResult(); res == nil || !strings.Contains(res.Instructions, "corral://jobs/{id}") {
			t.Errorf("%s: instructions %+v", face, res)
		}
		names := map[string]*mcp.Tool{}
		for _, tool := range tools.Tools {
			names[tool.Name] = tool
			if tool.Title == "" || tool.OutputSchema == nil || tool.Annotations == nil {
				t.Errorf("%s %s: title %q, output schema %v, annotations %v", face, tool.Name, tool.Title, tool.OutputSchema != nil, tool.Annotations)
			}
			b, _ := json.Marshal(tool.InputSchema)
			var sch jsonschema.Schema
			if err := json.Unmarshal(b, &sch); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), `"type":[`) {
				t.Errorf("%s %s: a type union in %s", face, tool.Name, b)
			}
		}
		for _, ro := range []string{api.ToolReadOutput, api.ToolGrepOutput, api.ToolJobOutput, api.ToolJobList, api.ToolJobWait, api.ToolHistory} {
			if tool := names[ro]; tool == nil || !tool.Annotations.ReadOnlyHint {
				t.Errorf("%s %s: not read-only", face, ro)
			}
		}
		if tool := names[api.ToolJobKill]; tool == nil || tool.Annotations.DestructiveHint == nil || !*tool.Annotations.DestructiveHint {
			t.Errorf("%s job_kill: not destructive", face)
		}
		bash := names[api.ToolBash].Description
		if n := len(bash); n >= 800 {
			t.Errorf("%s: bash description is %d characters", face, n)
		}
		if sessionless := strings.Contains(bash, "no MCP session"); sessionless != (face == "sessionless") {
			t.Errorf("%s: bash description says no MCP session: %v", face, sessionless)
		}
		if hist := names[api.ToolHistory].Description; strings.Contains(hist, "GET /v1/") != (face != "stdio") {
			t.Errorf("%s: history description %q", face, hist)
		}
	}
}

// httpClientSession connects a go-sdk client to e's /mcp at version.
func httpClientSession(t *testing.T, e *env, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := newMCPClient().Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: e.ts.URL + "/mcp", HTTPClient: e.ts.Client(), MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestMCPBashArguments: env, stdin, the policies and description reach the
// command (description is accepted and ignored); a timeout in milliseconds
// is refused saying so; a sessionless call's result says state does not
// carry, and one naming a session does not.
func TestMCPBashArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	call := mcpTextCaller(t, e, "2026-07-28")
	text, isErr := call(api.ToolBash, map[string]any{"command": `echo "$GREETING"; cat; seq 5000`, "env": map[string]any{"GREETING": "hi"},
		"stdin": "from stdin\n", "stdoutPolicy": "tail", "description": "greets"})
	if isErr || strings.Contains(text, "hi\nfrom stdin") || !strings.Contains(text, "[truncated: kept the last") || !strings.HasSuffix(strings.SplitN(text, "\n[exit", 2)[0], "5000") {
		t.Errorf("env/stdin/tail: %q", text[:min(len(text), 300)])
	}
	if !strings.Contains(text, "no MCP session and named none") {
		t.Errorf("a sessionless call's text lacks the note: %q", text[max(0, len(text)-300):])
	}
	text, _ = call(api.ToolBash, map[string]any{"command": "cat", "stdin": "x\n", "session": "named"})
	if strings.Contains(text, "no MCP session") || !strings.HasPrefix(text, "x\n") {
		t.Errorf("a call naming a session: %q", text)
	}
	text, isErr = call(api.ToolBash, map[string]any{"command": "true", "timeout": 120000})
	if !isErr || !strings.Contains(text, "seconds, not milliseconds") {
		t.Errorf("timeout 120000: %q", text)
	}
}

// TestMCPJobWaitFilterBoth: job_wait returns a job's Result, or running:
// true at its timeout; job_output reads both streams in one call and keeps
// only the lines a filter matches; interactive with yield returns a running
// job whose stdin job_input answers.
func TestMCPJobWaitFilterBoth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := httpClientSession(t, e, "2025-11-25")
	call := func(name string, args map[string]any) (*mcp.CallToolResult, string) {
		t.Helper()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r, toolText(r)
	}
	r, _ := call(api.ToolBash, map[string]any{"command": "printf 'a1\\nb2\\na3\\n'; echo err >&2; sleep 0.3; exit 3", "background": true})
	var st supervisor.JobStarted
	structured(t, r, &st)
	if r, text := call(api.ToolJobWait, map[string]any{"id": st.ID, "timeout": 0.05}); r.IsError || !strings.Contains(text, "still running") {
		t.Errorf("job_wait at its timeout: %q", text)
	}
	r, text := call(api.ToolJobWait, map[string]any{"id": st.ID, "timeout": 10})
	var res supervisor.Result
	structured(t, r, &res)
	if res.ExitCode == nil || *res.ExitCode != 3 || !strings.Contains(text, "[exit code 3") {
		t.Errorf("job_wait: %+v %q", res, text)
	}
	r, text = call(api.ToolJobOutput, map[string]any{"id": st.ID, "stream": "both", "filter": "^a"})
	var out api.JobOutputResult
	structured(t, r, &out)
	if out.Data != "a1\na3\n" || out.DroppedLines != 2 || out.Stderr == nil || out.Stderr.Data != "" ||
		!strings.Contains(text, "a1\na3\n") || !strings.Contains(text, "[stderr]\n") {
		t.Errorf("job_output both with filter: %+v %q", out, text)
	}
	if r, text := call(api.ToolJobOutput, map[string]any{"id": st.ID, "filter": "("}); !r.IsError || !strings.HasPrefix(text, "INVALID_ARGUMENT") {
		t.Errorf("a bad filter: %q", text)
	}

	r, text = call(api.ToolBash, map[string]any{"command": "echo name?; read x; echo got $x", "interactive": true, "yield": 0.5})
	structured(t, r, &res)
	if !res.Running || res.JobID == "" || !strings.Contains(text, "name?") || !strings.Contains(text, "job_input") {
		t.Fatalf("interactive with yield: %+v %q", res, text)
	}
	if _, text := call(api.ToolJobInput, map[string]any{"id": res.JobID, "data": "bob\n", "yield": 5}); !strings.Contains(text, "got bob") {
		t.Errorf("answer: %q", text)
	}
}

// TestHistoryNoJournal: without a journal, history says why; over stdio it
// names no HTTP route.
func TestHistoryNoJournal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config, s *supervisor.Config) {
		s.DataDir = ""
		c.NoJournal = "another corral process holds the journal"
	})
	cs := inMemoryMCP(t, e)
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: api.ToolHistory, Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := toolText(r); !r.IsError || !strings.Contains(text, "keeps no journal: another corral process holds the journal") || strings.Contains(text, "/v1/") {
		t.Errorf("history without a journal: %q", text)
	}
}
