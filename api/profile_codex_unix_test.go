//go:build unix

package api_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
)

// codexSession is the session ID of a Codex result whose process runs on,
// or 0.
func codexSession(text string) int {
	m := regexp.MustCompile(`(?m)^Process running with session ID (\d+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// codexHeader matches the head of Codex's result text up to Output:.
var codexHeader = regexp.MustCompile(`^Chunk ID: [0-9a-f]{6}\nWall time: \d+\.\d{4} seconds\n`)

// TestProfileCodexCalls drives the codex profile as Codex calls it: a
// command that exits (stdout and stderr in one stream, the exit code), one
// still running at its yield (a session ID; write_stdin reads only what is
// new, returns at the exit, then the session is unknown), a write to a
// session without a tty (refused in Codex's words), a tty command that
// waits for input (the call returns at the wait, not at the yield), Ctrl-C
// as a key, the output bound of max_output_tokens with corral's marker, the
// tree killed at the end, and another client's session (unknown).
func TestProfileCodexCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withProfile(api.ProfileCodex))
	call := mcpTextCaller(t, e, "2025-11-25")
	other := mcpTextCaller(t, e, "2025-11-25")

	// Exit: one stream, in order; the exit code; no session.
	text, isErr := call(api.ToolCodexExecCommand, map[string]any{"cmd": "echo out; echo err >&2; echo out2; exit 3", "login": false})
	if isErr || !codexHeader.MatchString(text) || !strings.Contains(text, "\nProcess exited with code 3\nOriginal token count: 4\nOutput:\nout\nerr\nout2\n[exit code 3 after ") ||
		codexSession(text) != 0 {
		t.Errorf("exit: %q", text)
	}

	// Yield: running with a session ID; a poll reads only what is new and
	// returns at the exit (well before its 20 s yield).
	text, _ = call(api.ToolCodexExecCommand, map[string]any{"cmd": "echo first; sleep 2; echo second", "yield_time_ms": 1000, "login": false})
	id := codexSession(text)
	if id == 0 || !strings.HasSuffix(text, "Output:\nfirst\n") {
		t.Fatalf("yield: %q", text)
	}
	begin := time.Now()
	text, isErr = call(api.ToolCodexWriteStdin, map[string]any{"session_id": id, "yield_time_ms": 20000})
	if isErr || !strings.Contains(text, "Process exited with code 0\n") || !strings.Contains(text, "Output:\nsecond\n[exit code 0") ||
		time.Since(begin) > 10*time.Second {
		t.Errorf("poll to the exit (%v): %q", time.Since(begin), text)
	}
	if text, isErr := call(api.ToolCodexWriteStdin, map[string]any{"session_id": id}); !isErr || !strings.Contains(text, "Unknown process id "+strconv.Itoa(id)) {
		t.Errorf("a session after its end: %q", text)
	}

	// Without a tty stdin is closed, as in Codex; another client's session
	// is unknown.
	text, _ = call(api.ToolCodexExecCommand, map[string]any{"cmd": "sleep 30", "yield_time_ms": 250})
	id = codexSession(text)
	if text, isErr := call(api.ToolCodexWriteStdin, map[string]any{"session_id": id, "chars": "x\n"}); !isErr ||
		!strings.Contains(text, "stdin is closed for this session; rerun exec_command with tty=true to keep stdin open") {
		t.Errorf("write without a tty: %q", text)
	}
	if text, isErr := other(api.ToolCodexWriteStdin, map[string]any{"session_id": id}); !isErr || !strings.Contains(text, "Unknown process id") {
		t.Errorf("another client's session: %q", text)
	}

	// A tty command waiting for input: the call returns at the wait, not
	// at its 30 s yield; the answer comes back with the exit.
	begin = time.Now()
	text, _ = call(api.ToolCodexExecCommand, map[string]any{"cmd": `read -p 'name? ' x; echo "hi $x"`, "tty": true, "yield_time_ms": 30000, "login": false})
	id = codexSession(text)
	if id == 0 || !strings.Contains(text, "Process waiting for input: ") || !strings.Contains(text, "name? ") || time.Since(begin) > 15*time.Second {
		t.Fatalf("tty wait (%v): %q", time.Since(begin), text)
	}
	text, _ = call(api.ToolCodexWriteStdin, map[string]any{"session_id": id, "chars": "bob\r", "yield_time_ms": 10000})
	if !strings.Contains(text, "Process exited with code 0") || !strings.Contains(text, "hi bob") {
		t.Errorf("tty answer: %q", text)
	}

	// Ctrl-C is a key on a tty: the process ends.
	text, _ = call(api.ToolCodexExecCommand, map[string]any{"cmd": "sleep 100", "tty": true, "yield_time_ms": 500, "login": false})
	id = codexSession(text)
	text, _ = call(api.ToolCodexWriteStdin, map[string]any{"session_id": id, "chars": "\u0003", "yield_time_ms": 5000})
	if codexSession(text) != 0 || !strings.Contains(text, "SIGINT") && !strings.Contains(text, "code 130") {
		t.Errorf("Ctrl-C: %q", text)
	}

	// The bound: max_output_tokens at 4 bytes a token, head and tail kept,
	// corral's marker between them; the original count covers it all.
	text, _ = call(api.ToolCodexExecCommand, map[string]any{"cmd": "seq 50000", "max_output_tokens": 100, "login": false})
	out := text[strings.Index(text, "Output:\n")+len("Output:\n"):]
	view, spill, _ := strings.Cut(out, "[corral: a copy of this command's output is saved in ")
	if !strings.Contains(text, "Original token count: 72224\n") || !strings.HasPrefix(out, "1\n2\n") ||
		!regexp.MustCompile(`\n\[truncated: kept the first \d+ and the last \d+ of 50000 lines; limit 4000 lines / 400B\.[^\]]*\]\n`).MatchString(view) ||
		!strings.HasSuffix(view, "\n50000\n") || len(view) > 400+512 || !strings.Contains(spill, ".log]\n[exit code 0 after ") {
		t.Errorf("bound: %q", text)
	}

	// The tree: a process the command left behind is killed at its end.
	text, _ = call(api.ToolCodexExecCommand, map[string]any{"cmd": "sleep 300 & echo $!", "login": false})
	pid, err := strconv.Atoi(strings.SplitN(text[strings.Index(text, "Output:\n")+len("Output:\n"):], "\n", 2)[0])
	if err != nil {
		t.Fatalf("left behind: %q", text)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the process the command left behind (%d) is alive", pid)
	}
}

// TestProfileCodexCancel: cancelling an exec_command call that is waiting
// for its yield kills the command's tree.
func TestProfileCodexCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withProfile(api.ProfileCodex))
	cs := inMemoryMCP(t, e)
	pidFile := t.TempDir() + "/pid"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolCodexExecCommand,
			Arguments: map[string]any{"cmd": "sleep 300 & echo $! > " + pidFile + "; wait", "login": false, "yield_time_ms": 30000}})
		done <- err
	}()
	var pid int
	for deadline := time.Now().Add(20 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if pid == 0 {
		t.Fatal("the command did not start")
	}
	cancel()
	<-done
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d outlived its cancelled call", pid)
		}
	}
}
