package api_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestMCPTypeScriptSDK drives the server with the official MCP TypeScript
// SDK (installed with npm into a temporary directory): a call silent for
// twice its request timeout succeeds on heartbeats alone, and a call
// aborted with an AbortController has its tree killed. It skips when npm
// or the registry is unavailable, and in -short mode.
func TestMCPTypeScriptSDK(t *testing.T) {
	proctest.Heavy(t)
	t.Parallel()
	if testing.Short() {
		t.Skip("installs @modelcontextprotocol/sdk with npm")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found; the TypeScript SDK test needs Node.js and npm")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	dir := t.TempDir()
	ictx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ictx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund",
		"--loglevel=error", "@modelcontextprotocol/sdk@1").CombinedOutput()
	if err != nil {
		t.Skipf("npm install @modelcontextprotocol/sdk failed (registry unavailable?): %v\n%s", err, out)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "ts_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, withToken(testToken), withHeartbeat(200*time.Millisecond))
	_, marker := proctest.Marker(t)
	cmd := exec.Command(node, filepath.Join(dir, "client.mjs"), e.ts.URL+"/mcp", testToken,
		marked(marker, "sleep 60 & echo ready; sleep 60"))
	cmd.Stderr = &lockedBuffer{}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if s := cmd.Stderr.(*lockedBuffer).String(); s != "" {
			t.Logf("node stderr:\n%s", s)
		}
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, stdout)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the TypeScript client ended early")
			}
			t.Log("ts:", l)
			return l
		case <-time.After(60 * time.Second):
			t.Fatal("the TypeScript client said nothing for 60 s")
		}
		return ""
	}
	if l := next(); !strings.HasPrefix(l, "connected ") {
		t.Fatalf("first line %q", l)
	}
	if l := next(); l != "heartbeat ok" {
		t.Errorf("a call silent for 2 s under a 1 s request timeout: %q, want heartbeat ok", l)
	}
	if l := next(); l != "ready" {
		t.Fatalf("got %q, want ready", l)
	}
	if l := next(); !strings.HasPrefix(l, "aborted") {
		t.Fatalf("got %q, want aborted", l)
	}
	// The abort is an explicit cancel: SIGTERM, then the (200 ms) grace.
	proctest.NoSurvivors(t, marker, 2*time.Second)
}
