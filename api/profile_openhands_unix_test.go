//go:build unix

package api_test

import (
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
)

// TestProfileOpenHandsCalls drives the openhands profile as OpenHands'
// CodeAct agent calls execute_bash: a command that completes (exit code,
// working directory, OpenHands' suffixes), the working directory carried
// to the next command, the soft timeout with the command still running, a
// new command refused while it runs, C-c as a key, a command that waits for
// input answered with is_input (returning at the wait), the hard timeout
// then an empty command reading the rest, C-d and C-z, the output bound
// with corral's marker, the tree killed at the end, and another client's
// terminal (nothing running there).
func TestProfileOpenHandsCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withProfile(api.ProfileOpenHands))
	call := mcpTextCaller(t, e, "2025-11-25")
	other := mcpTextCaller(t, e, "2025-11-25")
	run := func(args map[string]any) string {
		t.Helper()
		args["security_risk"] = "LOW"
		text, isErr := call(api.ToolOpenHandsBash, args)
		if isErr {
			t.Fatalf("%v: %s", args, text)
		}
		return text
	}

	text := run(map[string]any{"command": "cd /tmp && echo out; echo err >&2; (exit 3)"})
	if !regexp.MustCompile(`^out\r?\nerr\n\[The command completed with exit code 3\.\]\n\[Current working directory: /tmp\]\n\[Command finished with exit code 3\]$`).MatchString(text) {
		t.Errorf("completed: %q", text)
	}
	if text := run(map[string]any{"command": "pwd"}); !strings.HasPrefix(text, "/tmp\n[The command completed with exit code 0.]") {
		t.Errorf("cwd carried: %q", text)
	}

	// The soft timeout: 10 s without new output; the command runs on, a
	// new command is not executed, C-c ends it.
	begin := time.Now()
	text = run(map[string]any{"command": "echo start; sleep 60"})
	if d := time.Since(begin); !strings.HasPrefix(text, "start\n[The command has no new output after 10 seconds. You may wait longer") || d < 10*time.Second || d > 30*time.Second {
		t.Errorf("soft timeout (%v): %q", d, text)
	}
	if text := run(map[string]any{"command": "ls"}); !strings.HasPrefix(text, "[Below is the output of the previous command.]\n\n[Your command \"ls\" is NOT executed.") {
		t.Errorf("a new command while one runs: %q", text)
	}
	if text := run(map[string]any{"command": "C-c", "is_input": "true"}); !strings.Contains(text, "[The command completed with exit code 130. CTRL+C was sent.]") {
		t.Errorf("C-c: %q", text)
	}

	// Waiting for input: the call returns at the wait, not at the soft
	// timeout; the answer's echo is not in the output.
	begin = time.Now()
	text = run(map[string]any{"command": `read -p 'name? ' x; echo "hi $x"`})
	if d := time.Since(begin); !strings.Contains(text, "name?") || !strings.Contains(text, "[The command is waiting for input: ") || d > 8*time.Second {
		t.Errorf("waiting (%v): %q", d, text)
	}
	if text := run(map[string]any{"command": "bob", "is_input": "true"}); !strings.HasPrefix(text, "hi bob\n[The command completed with exit code 0.]") {
		t.Errorf("input: %q", text)
	}

	// The hard timeout returns with the command running; an empty command
	// reads the rest.
	text = run(map[string]any{"command": "sleep 3; echo done", "timeout": 1})
	if !strings.HasPrefix(text, "\n[The command timed out after 1 seconds. ") {
		t.Errorf("hard timeout: %q", text)
	}
	if text := run(map[string]any{"command": ""}); !strings.Contains(text, "done\n[The command completed with exit code 0.]") {
		t.Errorf("empty command: %q", text)
	}

	// C-d ends cat's input; C-z stops sleep, which is then killed.
	run(map[string]any{"command": "cat"})
	if text := run(map[string]any{"command": "C-d", "is_input": "true"}); !strings.Contains(text, "[The command completed with exit code 0. CTRL+D was sent.]") {
		t.Errorf("C-d: %q", text)
	}
	run(map[string]any{"command": "sleep 60", "timeout": 1})
	if text := run(map[string]any{"command": "C-z", "is_input": "true"}); !strings.Contains(text, "CTRL+Z was sent.]") || !strings.Contains(text, "no job control") {
		t.Errorf("C-z: %q", text)
	}
	if text := run(map[string]any{"command": "echo free"}); !strings.HasPrefix(text, "free\n[The command completed with exit code 0.]") {
		t.Errorf("after C-z: %q", text)
	}

	// The bound: OpenHands' 30000 characters, head and tail, corral's marker.
	text = run(map[string]any{"command": "seq 50000"})
	if !strings.HasPrefix(text, "1\n2\n") || !regexp.MustCompile(`\n\[truncated: kept the first \d+ and the last \d+ of 50000 lines; limit 4000 lines / [^\]]*\]\n`).MatchString(text) ||
		!regexp.MustCompile(`\n50000\n\[corral: a copy of this command's output is saved in [^\]]+\]\n\[The command completed with exit code 0\.\]`).MatchString(text) || len(text) > 30000+2000 {
		t.Errorf("bound: %.300q … %.300q", text, text[max(0, len(text)-300):])
	}

	// The tree: a process left behind is killed at the command's end.
	text = run(map[string]any{"command": "sleep 300 & echo $!"})
	pid, err := strconv.Atoi(strings.SplitN(text, "\n", 2)[0])
	if err != nil {
		t.Fatalf("left behind: %q", text)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the process the command left behind (%d) is alive", pid)
	}

	if text, _ := other(api.ToolOpenHandsBash, map[string]any{"command": "", "security_risk": "LOW"}); text != "ERROR: No previous running command to retrieve logs from." {
		t.Errorf("another client: %q", text)
	}
}
