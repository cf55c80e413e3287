package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
)

// BenchmarkProfileOverhead measures an MCP tool call of `true` in each
// profile over the same in-memory transport and supervisor setup,
// alternating the profiles in one loop so that the machine's load falls on
// all of them alike: the corral profile's bash is the baseline. It reports
// each call's mean (PROFILE-ms) and its ratio to the baseline (x-PROFILE),
// the profile's overhead. codex runs `true` without a login shell
// (login: false) as bash does; codex-login is its default, `bash -lc`, whose
// extra cost is the login shell's start-up files, not the profile's;
// openhands runs every command on a terminal of its own.
func BenchmarkProfileOverhead(b *testing.B) {
	cases := []struct {
		name, profile, tool string
		args                map[string]any
	}{
		{"corral", api.ProfileCorral, api.ToolBash, map[string]any{"command": "true"}},
		{"claude-code", api.ProfileClaudeCode, api.ToolClaudeBash, map[string]any{"command": "true"}},
		{"codex", api.ProfileCodex, api.ToolCodexExecCommand, map[string]any{"cmd": "true", "login": false}},
		{"codex-login", api.ProfileCodex, api.ToolCodexExecCommand, map[string]any{"cmd": "true"}},
		{"openhands", api.ProfileOpenHands, api.ToolOpenHandsBash, map[string]any{"command": "true", "security_risk": "LOW"}},
	}
	ctx := context.Background()
	sessions := make([]*mcp.ClientSession, len(cases))
	for i, c := range cases {
		srv, err := api.New(api.Config{Supervisor: benchSupervisor(b), MCPTools: c.profile})
		if err != nil {
			b.Fatal(err)
		}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.MCPServer().Connect(ctx, st, nil)
		if err != nil {
			b.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close(); ss.Wait(); srv.Shutdown(ctx) })
		sessions[i] = cs
	}
	spent := make([]time.Duration, len(cases))
	for b.Loop() {
		for i, c := range cases {
			begin := time.Now()
			r, err := sessions[i].CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			spent[i] += time.Since(begin)
			if err != nil || r.IsError {
				b.Fatalf("%s: %v %+v", c.name, err, r)
			}
		}
	}
	for i, c := range cases {
		b.ReportMetric(float64(spent[i].Microseconds())/1000/float64(b.N), c.name+"-ms")
		if i > 0 {
			b.ReportMetric(float64(spent[i])/float64(spent[0]), "x-"+c.name)
		}
	}
}
