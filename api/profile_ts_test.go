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

// tsProfileClient runs testdata/SCRIPT, a client of the official MCP
// TypeScript SDK (installed with npm into a temporary directory), against a
// server of profile over streamable HTTP, and returns its steps: one JSON
// line per step, by the step's name.
func tsProfileClient(t *testing.T, profile, script string) map[string]map[string]any {
	t.Helper()
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
	src, err := os.ReadFile(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withToken(testToken), withProfile(profile))
	ctx, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel2()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"), e.ts.URL+"/mcp", testToken, t.TempDir())
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
	return steps
}

// TestProfileClaudeTypeScriptSDK drives the claude-code profile with the
// official MCP TypeScript SDK as Claude Code calls it: Bash with a timeout
// in milliseconds and a description, Bash in the background, BashOutput
// until its output shows, KillShell.
func TestProfileClaudeTypeScriptSDK(t *testing.T) {
	proctest.Heavy(t)
	t.Parallel()
	steps := tsProfileClient(t, api.ProfileClaudeCode, "ts_claude_client.mjs")
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

// TestProfileCodexTypeScriptSDK drives the codex profile with the official
// MCP TypeScript SDK as Codex calls its unified exec tools: exec_command
// with workdir, yield_time_ms, max_output_tokens and the approval
// arguments its models send; a tty command that waits for input answered
// with write_stdin; a command still running at its yield, polled with
// empty chars; Ctrl-C typed into a tty session.
func TestProfileCodexTypeScriptSDK(t *testing.T) {
	proctest.Heavy(t)
	t.Parallel()
	steps := tsProfileClient(t, api.ProfileCodex, "ts_codex_client.mjs")
	str := func(step, key string) string { s, _ := steps[step][key].(string); return s }
	if names, _ := json.Marshal(steps["tools"]["names"]); string(names) != `["exec_command","write_stdin"]` {
		t.Errorf("tools %s", names)
	}
	if s := str("exec", "text"); !strings.Contains(s, "Process exited with code 0\n") || !strings.Contains(s, "Output:\nhello\noops\n[exit code 0 after ") {
		t.Errorf("exec_command: %q", s)
	}
	if s := str("prompt", "text"); !strings.Contains(s, "Process running with session ID ") || !strings.Contains(s, "Process waiting for input") {
		t.Errorf("tty prompt: %q", s)
	}
	if s := str("answer", "text"); !strings.Contains(s, "Process exited with code 0\n") || !strings.Contains(s, "hi ada") {
		t.Errorf("write_stdin answer: %q", s)
	}
	if s := str("running", "text"); !strings.Contains(s, "Process running with session ID ") || !strings.HasSuffix(s, "Output:\nstart\n") {
		t.Errorf("yield: %q", s)
	}
	if s := str("poll", "text"); !strings.Contains(s, "Process running with session ID ") || !strings.HasSuffix(s, "Output:\n") {
		t.Errorf("poll: %q", s)
	}
	if s := str("ctrl-c", "text"); strings.Contains(s, "Process running") || !strings.Contains(s, "SIGINT") && !strings.Contains(s, "code 130") {
		t.Errorf("Ctrl-C: %q", s)
	}
}

// TestProfileOpenHandsTypeScriptSDK drives the openhands profile with the
// official MCP TypeScript SDK as OpenHands' CodeAct agent calls
// execute_bash: a command with security_risk, the working directory
// carried, a prompt answered with is_input "true", a hard timeout, C-c.
func TestProfileOpenHandsTypeScriptSDK(t *testing.T) {
	proctest.Heavy(t)
	t.Parallel()
	steps := tsProfileClient(t, api.ProfileOpenHands, "ts_openhands_client.mjs")
	str := func(step, key string) string { s, _ := steps[step][key].(string); return s }
	if names, _ := json.Marshal(steps["tools"]["names"]); string(names) != `["execute_bash"]` {
		t.Errorf("tools %s", names)
	}
	if s := str("cd", "text"); !strings.HasPrefix(s, "hello\n[The command completed with exit code 0.]\n[Current working directory: ") {
		t.Errorf("cd: %q", s)
	}
	if s, cd := str("pwd", "text"), str("cd", "text"); !strings.Contains(cd, "[Current working directory: "+strings.SplitN(s, "\n", 2)[0]+"]") {
		t.Errorf("pwd %q after cd %q", s, cd)
	}
	if s := str("prompt", "text"); !strings.Contains(s, "name?") || !strings.Contains(s, "[The command is waiting for input: ") {
		t.Errorf("prompt: %q", s)
	}
	if s := str("answer", "text"); !strings.HasPrefix(s, "hi ada\n[The command completed with exit code 0.]") {
		t.Errorf("answer: %q", s)
	}
	if s := str("slow", "text"); !strings.Contains(s, "[The command timed out after 2 seconds. ") {
		t.Errorf("hard timeout: %q", s)
	}
	if s := str("ctrl-c", "text"); !strings.Contains(s, "[The command completed with exit code 130. CTRL+C was sent.]") {
		t.Errorf("C-c: %q", s)
	}
}
