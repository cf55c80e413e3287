package api_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
)

// BenchmarkProfileOverhead measures an MCP tool call of `true` in each
// profile over the same in-memory transport and supervisor setup: the
// corral profile's bash is the baseline, claude-code's Bash the profile.
// The ratio of their ns/op is the profile's overhead.
func BenchmarkProfileOverhead(b *testing.B) {
	for _, c := range []struct{ profile, tool string }{
		{api.ProfileCorral, api.ToolBash},
		{api.ProfileClaudeCode, api.ToolClaudeBash},
	} {
		b.Run(c.profile, func(b *testing.B) {
			srv, err := api.New(api.Config{Supervisor: benchSupervisor(b), MCPTools: c.profile})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
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
			params := &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"command": "true"}}
			for b.Loop() {
				r, err := cs.CallTool(ctx, params)
				if err != nil || r.IsError {
					b.Fatalf("%v %+v", err, r)
				}
			}
		})
	}
}
