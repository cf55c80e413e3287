package api_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestInspectorCLITimeout: the MCP Inspector CLI calls bash with
// --tool-arg timeout=5 and the call runs: timeout's schema is a plain
// number, so the Inspector sends 5 as a number (against the type union
// ["null","number"] it sent the string "5", which was refused).
func TestInspectorCLITimeout(t *testing.T) {
	proctest.Heavy(t)
	t.Parallel()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund",
		"--loglevel=error", "@modelcontextprotocol/inspector-cli@0.15").CombinedOutput(); err != nil {
		t.Skipf("npm install @modelcontextprotocol/inspector-cli failed (registry unavailable?): %v\n%s", err, out)
	}
	e := newEnv(t)
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build", "index.js")
	out, err := exec.CommandContext(ctx, node, cli, e.ts.URL+"/mcp", "--transport", "http", "--method", "tools/call",
		"--tool-name", "bash", "--tool-arg", "command=echo inspected", "--tool-arg", "timeout=5").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `inspected\n[exit code 0`) || strings.Contains(string(out), `"isError": true`) {
		t.Errorf("inspector: %v\n%s", err, out)
	}
}
