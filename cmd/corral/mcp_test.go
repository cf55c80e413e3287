package main

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestMCPStop ends `corral mcp` while a command runs, by closing its stdin
// or by SIGTERM: the server exits 0 at once and the command's tree is gone.
// Raw JSON-RPC lines, because the SDK client's Close waits for its own call.
// (The tools themselves are tested in package api against the same binary.)
func TestMCPStop(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stdin", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			testMCPStop(t, how)
		})
	}
}

func testMCPStop(t *testing.T, how string) {
	entry, marker := proctest.Marker(t)
	cmd := exec.Command(corralBinary(t), "mcp", "--data-dir", t.TempDir(), "--grace", "0.2")
	cmd.Env = append(cmd.Environ(), entry)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, stdout) // drain until corral exits
		exited <- cmd.Wait()
	}()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 60 & sleep 60 & wait"}}}`,
	}
	w := bufio.NewWriter(stdin)
	w.WriteString(strings.Join(lines, "\n") + "\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(proctest.Survivors(marker)) < 4 { // corral, bash and two sleeps
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start: %v", proctest.Survivors(marker))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if how == "stdin" {
		stdin.Close()
	} else if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("corral mcp exited with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("corral mcp still running 5 s after %s", how)
	}
	proctest.NoSurvivors(t, marker, 0)
}

// TestMCPBadLines: `corral mcp` answers a malformed line and a 20 MiB line
// (over the 16 MiB bound) with JSON-RPC parse errors and keeps serving: a
// background job started before them is still there after, and calls work.
func TestMCPBadLines(t *testing.T) {
	t.Parallel()
	entry, marker := proctest.Marker(t)
	cmd := exec.Command(corralBinary(t), "mcp", "--data-dir", t.TempDir(), "--grace", "0.2")
	cmd.Env = append(cmd.Environ(), entry)
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
		case err := <-done:
			if err != nil {
				t.Errorf("corral mcp exited with %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Error("corral mcp did not exit after stdin closed")
		}
		proctest.NoSurvivors(t, marker, time.Second)
	}()
	replies := bufio.NewScanner(stdout)
	replies.Buffer(nil, 1<<20)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, wants ...string) {
		t.Helper()
		if !replies.Scan() {
			t.Fatalf("%s: corral mcp closed its stdout (%v)", what, replies.Err())
		}
		for _, w := range wants {
			if !strings.Contains(replies.Text(), w) {
				t.Fatalf("%s: reply %.300s lacks %s", what, replies.Text(), w)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	expect("initialize", `"id":1,"result"`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 60","background":true}}}`)
	expect("background job", `"id":2,"result"`, `j-`)

	send(`this is not json`)
	expect("garbage", `"id":null`, `"code":-32700`)
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"` + strings.Repeat("x", 20<<20) + `"}}}`)
	expect("20 MiB line", `"id":null`, `"code":-32700`, `longer than 16777216 bytes`)
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo alive"}}}`)
	expect("call after", `"id":4,"result"`, `alive`)
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"job_list","arguments":{}}}`)
	expect("job list", `"id":5,"result"`, `sleep 60`, `running`)
}

// TestMCPStdioSession: over stdio the connection is one session: the cwd
// and exported variables of one bash call carry to the next (the go-sdk
// client, as a harness would run corral mcp).
func TestMCPStdioSession(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	cmd := exec.Command(corralBinary(t), "mcp", "--data-dir", t.TempDir())
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	text := func(command string) string {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
		if err != nil || r.IsError {
			t.Fatalf("bash %q: %v %+v", command, err, r)
		}
		return r.Content[0].(*mcp.TextContent).Text
	}
	text("cd " + dir + " && export A='two words'")
	if got, want := text(`pwd; printf '%s\n' "$A"`), dir+"\ntwo words\n"; !strings.HasPrefix(got, want) {
		t.Errorf("second call printed %q, want it to start with %q", got, want)
	}
}
