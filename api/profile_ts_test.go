package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
)

// TestProfileClaudeTypeScriptSDK drives the claude-code profile with the
// official MCP TypeScript SDK as Claude Code calls it: Bash with a timeout
// in milliseconds and a description, Bash in the background, BashOutput
// until its output shows, KillShell.
func TestProfileClaudeTypeScriptSDK(t *testing.T) {
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
	ictx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ictx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund",
		"--loglevel=error", "@modelcontextprotocol/sdk@1").CombinedOutput(); err != nil {
		t.Skipf("npm install @modelcontextprotocol/sdk failed (registry unavailable?): %v\n%s", err, out)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "ts_claude_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withToken(testToken), withProfile(api.ProfileClaudeCode))
	ctx, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel2()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"), e.ts.URL+"/mcp", testToken)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		steps[m["step"].(string)] = m
	}
	str := func(step, key string) string { s, _ := steps[step][key].(string); return s }
	if names, _ := json.Marshal(steps["tools"]["names"]); string(names) != `["Bash","BashOutput","KillShell"]` {
		t.Errorf("tools %s", names)
	}
	if !strings.HasPrefix(str("bash", "text"), "hello\noops\n[exit code 0 after ") {
		t.Errorf("Bash: %q", str("bash", "text"))
	}
	if !strings.HasPrefix(str("background", "text"), "Command running in background with ID: j-") {
		t.Errorf("background: %q", str("background", "text"))
	}
	if !strings.HasPrefix(str("output", "text"), "<status>running</status>\n\n<stdout>\nstarted\n</stdout>") {
		t.Errorf("BashOutput: %q", str("output", "text"))
	}
	if !strings.HasPrefix(str("kill", "text"), `{"message":"Successfully killed shell: j-`) {
		t.Errorf("KillShell: %q", str("kill", "text"))
	}
}
