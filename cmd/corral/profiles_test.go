package main

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPToolsFlag: `corral mcp --tools PROFILE` (stdio) and `corral serve
// --mcp-tools PROFILE` (/mcp) serve each profile's tools, and a call of its
// shell tool runs (the go-sdk client, as a harness would connect).
func TestMCPToolsFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		profile string
		tools   []string
		call    string
		args    map[string]any
		want    string
	}{
		// Codex's tools; exec_command's result is Codex's text.
		{"codex", []string{"exec_command", "write_stdin"}, "exec_command", map[string]any{"cmd": "echo hi", "login": false},
			"Process exited with code 0\nOriginal token count: 1\nOutput:\nhi\n[exit code 0 after "},
		// OpenHands' tool; the observation is OpenHands' text.
		{"openhands", []string{"execute_bash"}, "execute_bash", map[string]any{"command": "echo hi", "security_risk": "LOW"},
			"hi\n[The command completed with exit code 0.]"},
		// Claude Code's tools.
		{"claude-code", []string{"Bash", "BashOutput", "KillShell"}, "Bash", map[string]any{"command": "echo hi"}, "hi\n[exit code 0 after "},
	} {
		t.Run(c.profile, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			check := func(face string, cs *mcp.ClientSession) {
				t.Helper()
				list, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tool := range list.Tools {
					names = append(names, tool.Name)
				}
				if !slices.Equal(names, c.tools) {
					t.Errorf("%s: tools %v, want %v", face, names, c.tools)
				}
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.call, Arguments: c.args})
				if err != nil || r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, c.want) {
					t.Errorf("%s: %s: %v %+v", face, c.call, err, r)
				}
			}
			cmd := exec.Command(corralBinary(t), "mcp", "--tools", c.profile, "--data-dir", t.TempDir())
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			check("corral mcp --tools", cs)

			s := startServe(t, nil, "--listen", "127.0.0.1:0", "--mcp-tools", c.profile)
			hs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint: "http://" + s.addr + "/mcp", MaxRetries: -1,
				HTTPClient: &http.Client{Transport: bearer{s.token, s.client.Transport}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer hs.Close()
			check("corral serve --mcp-tools", hs)
		})
	}
}

// bearer sends token on every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
