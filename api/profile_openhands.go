package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/supervisor"
)

// The openhands profile serves OpenHands' execute_bash, with its argument
// schema, description and observation text as OpenHands ships them
// (docs/profiles.md), over corral: every command runs on a terminal of its
// own in the client's corral session (cwd and exported variables carry),
// as a job, so that is_input can reach it; bounds, markers, spill files,
// tree kill, journal and tenancy are corral's.
//
// Source: github.com/All-Hands-AI/OpenHands at commit
// 156d0686c46aafb0fa9d291da6421fb6f64dddc0:
// openhands/agenthub/codeact_agent/tools/bash.py (create_cmd_run_tool: the
// name, _DETAILED_BASH_DESCRIPTION, the parameters), tools/security_utils.py
// (SECURITY_RISK_DESC, RISK_LEVELS), agenthub/codeact_agent/function_calling.py
// (is_input is the string "true"; timeout a hard timeout in seconds),
// openhands/runtime/utils/bash.py (BashSession.execute: the soft timeout
// of no new output, the hard timeout, the C-<key> special keys, the
// suffixes and prefixes), runtime/utils/bash_constants.py
// (TIMEOUT_MESSAGE_TEMPLATE), runtime/action_execution_server.py (the soft
// timeout of 10 s), events/observation/commands.py (to_agent_observation).
// api/testdata/profiles/openhands holds the expected tool list and says
// what differs.

// ToolOpenHandsBash is OpenHands' tool name.
const ToolOpenHandsBash = "execute_bash"

// openHandsNoChange is OpenHands' soft timeout: no new output for this long
// returns the call with the command still running.
const openHandsNoChange = 10 * time.Second

// openHandsPoll is how often a call looks for new output, as BashSession's
// POLL_INTERVAL.
const openHandsPoll = 500 * time.Millisecond

// openHandsMaxChars is OpenHands' MAX_CMD_OUTPUT_SIZE.
const openHandsMaxChars = 30000

//go:embed profiles/openhands/execute_bash.txt
var openHandsPrompt string

// openHandsTimeoutMessage is OpenHands' TIMEOUT_MESSAGE_TEMPLATE.
const openHandsTimeoutMessage = `You may wait longer to see additional output by sending empty command '', ` +
	`send other commands to interact with the current process, ` +
	`send keys ("C-c", "C-z", "C-d") to interrupt/kill the previous command before sending your new command, ` +
	`or use the timeout parameter in execute_bash for future commands.`

// OpenHandsBashInput is the arguments of OpenHands' execute_bash.
type OpenHandsBashInput struct {
	Command string `json:"command"`
	// IsInput is "true" or "false", as OpenHands' schema has it.
	IsInput string   `json:"is_input,omitempty"`
	Timeout *float64 `json:"timeout,omitempty"` // seconds, a hard timeout
	// SecurityRisk is the model's own assessment; accepted and unused.
	SecurityRisk string `json:"security_risk"`
}

// openHandsRunning is each client's running command: OpenHands has one
// terminal, and is_input and an empty command reach the command that
// still runs in it.
type openHandsRunning struct {
	mu   sync.Mutex
	cmds map[string]codexProc // guarded by mu; by owner
}

func (r *openHandsRunning) get(owner string) (codexProc, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.cmds[owner]
	return p, ok
}

func (r *openHandsRunning) set(owner string, p codexProc, ended bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmds == nil {
		r.cmds = map[string]codexProc{}
	}
	if ended {
		delete(r.cmds, owner)
		return
	}
	r.cmds[owner] = p
}

// openHandsDescription is the tool's description: OpenHands' own, but for
// its advice to leave servers running with '&', which corral's whole-tree
// kill at a command's end would break (it says what to do instead); on a
// face without MCP sessions nothing carries between commands, and it says
// so instead of promising a persistent session.
func openHandsDescription(face mcpFace) string {
	d := strings.Replace(openHandsPrompt, "* For commands that may run indefinitely, run them in the background and redirect output to a file, e.g. `python3 app.py > server.log 2>&1 &`.",
		"* Processes a command leaves running in the background (`&`) are killed when the command ends. For commands that may run indefinitely (servers, watchers), "+
			"run them in the foreground with their output redirected to a file, e.g. `python3 app.py > server.log 2>&1`: the call returns at the soft timeout and the command keeps running "+
			"(for at most "+minutes(supervisor.DefaultJobLifetime)+"); while it runs, the terminal takes only input for it (`is_input`), empty commands and keys.", 1)
	if face != faceSessionless {
		return d
	}
	d = strings.Replace(d, "Execute a bash command in the terminal within a persistent shell session.",
		"Execute a bash command in the terminal.", 1)
	return strings.Replace(d, "* Persistent session: Commands execute in a persistent shell session where environment variables, virtual environments, and working directory persist between commands.",
		"* No persistent session: this connection has no MCP session, so each command starts afresh: environment variables, virtual environments and the working directory do not persist between commands.", 1)
}

// newOpenHandsServer builds the MCP server of the openhands profile.
func (s *Server) newOpenHandsServer(face mcpFace) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral", Title: "corral", Version: s.version},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}})
	if s.toolInputs == nil {
		s.toolInputs = map[string]reflect.Type{}
	}
	srv.AddReceivingMiddleware(s.logToolCalls, s.strictArguments)
	addTool(s, srv, &mcp.Tool{Name: ToolOpenHandsBash, Description: openHandsDescription(face),
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"command", "security_risk"},
			Properties: map[string]*jsonschema.Schema{
				"command": prop("string", "The bash command to execute. Can be empty string to view additional logs when previous exit code is `-1`. "+
					"Can be `C-c` (Ctrl+C) to interrupt the currently running process. Note: You can only execute one bash command at a time. "+
					"If you need to run multiple commands sequentially, you can use `&&` or `;` to chain them together."),
				"is_input": {Type: "string", Enum: []any{"true", "false"},
					Description: "If True, the command is an input to the running process. If False, the command is a bash command to be executed in the terminal. Default is False."},
				"timeout": prop("number", "Optional. Sets a hard timeout in seconds for the command execution. If not provided, the command will use the default soft timeout behavior."),
				"security_risk": {Type: "string", Enum: []any{"LOW", "MEDIUM", "HIGH"},
					Description: "The LLM's assessment of the safety risk of this action. See the SECURITY_RISK_ASSESSMENT section in the system prompt for risk level definitions."},
			}}}, s.openHandsBash)
	return srv
}

// openHandsBash is execute_bash: a new command, an empty command (more
// output of the running one), or is_input (text typed into the running
// command, with Enter, or a C-<key>). The call returns when the command
// completes, when it waits for input (beyond OpenHands), after 10 s
// without new output (the soft timeout), or at the hard timeout; a
// command still running then stays the terminal's.
func (s *Server) openHandsBash(ctx context.Context, req *mcp.CallToolRequest, in OpenHandsBashInput) (*mcp.CallToolResult, any, error) {
	owner := s.mcpOwner(req)
	command := strings.TrimSpace(in.Command)
	isInput := in.IsInput == "true"
	var hard time.Duration
	if in.Timeout != nil {
		var err error
		if hard, err = supervisor.ParseSeconds("timeout", *in.Timeout, time.Millisecond, s.sup.Bounds().MaxTimeout); err != nil {
			return nil, nil, toolError(err)
		}
	}
	ctx, end := s.callContext(ctx, req)
	defer end()
	p, running := s.openHands.get(owner)
	if running && !s.sup.Jobs().Has(p.job) {
		s.openHands.set(owner, p, true) // forgotten: its end was never read
		running = false
	}
	switch {
	case !running && command == "":
		return textResult("ERROR: No previous running command to retrieve logs from."), nil, nil
	case !running && isInput:
		return textResult("ERROR: No previous running command to interact with."), nil, nil
	case running && !isInput && command != "":
		// OpenHands refuses a new command while one runs, and shows what
		// the running one printed since.
		c, err := s.readSince(ctx, p.job, p.read, openHandsLimit(s.sup.Bounds()))
		if err != nil {
			return nil, nil, toolError(err)
		}
		s.openHands.set(owner, codexProc{job: p.job, read: c.next}, c.ended)
		if !c.ended {
			return textResult("[Below is the output of the previous command.]\n" + openHandsOutput(c.view, "") +
				fmt.Sprintf("\n[Your command \"%s\" is NOT executed. The previous command is still running - You CANNOT send new commands until the previous command is completed. "+
					"By setting `is_input` to `true`, you can interact with the current process: %s]", command, openHandsTimeoutMessage)), nil, nil
		}
		// It completed meanwhile: the new command runs.
		running = false
	}
	key := ""
	if !running {
		jr := supervisor.JobRequest{Request: supervisor.Request{Command: command, Session: s.mcpSession(req), Label: ToolOpenHandsBash,
			Owner: owner, TTY: &supervisor.TTYSize{}, StdoutPolicy: budget.PolicyHeadTail}}
		st, err := s.startJob(FaceMCP, jr)
		if err != nil {
			return nil, nil, toolError(err)
		}
		p = codexProc{job: st.ID}
	} else if command != "" {
		data := command + "\r" // tmux send-keys with Enter
		if b, ok := controlKey(command); ok {
			data, key = string(b), command
		}
		if err := s.sup.Jobs().Input(p.job, []byte(data), false); err != nil && !errors.Is(err, supervisor.ErrJobStdin) {
			return nil, nil, toolError(err)
		}
	}
	c, timedOut, err := s.openHandsWait(ctx, p, hard)
	if err != nil {
		if !running {
			s.sup.Jobs().Kill(p.job) // the call is gone: so is its command
		}
		return nil, nil, toolError(err)
	}
	stopped := false
	if key == "C-z" && !c.ended {
		// corral's terminal has no job control to resume a stopped
		// command: it is killed with its tree, and the terminal is free.
		s.sup.Jobs().Kill(p.job)
		if c2, err := s.readSince(ctx, p.job, c.next, openHandsLimit(s.sup.Bounds())); err == nil {
			c2.view = c.view + c2.view
			c, stopped = c2, true
		}
	}
	s.openHands.set(owner, codexProc{job: p.job, read: c.next}, c.ended)
	return textResult(openHandsText(c, command, isInput, running, key, timedOut, stopped, hard)), nil, nil
}

// openHandsLimit is the output bound: OpenHands' 30000 characters, at most
// the server's budget of a stream.
func openHandsLimit(b supervisor.Bounds) budget.Limits {
	return budget.Limits{MaxBytes: min(openHandsMaxChars, b.Budget.MaxBytes), MaxLines: b.Budget.MaxLines}
}

// openHandsWait waits for command p to complete, to wait for input, to
// print nothing new for the soft timeout (none with a hard timeout, as
// OpenHands' blocking commands), or for the hard timeout, then reads what
// it printed since p.read. timedOut says the hard timeout passed.
func (s *Server) openHandsWait(ctx context.Context, p codexProc, hard time.Duration) (jobChunk, bool, error) {
	begin := time.Now()
	lastChange, seen := begin, int64(-1)
	timedOut := false
	for {
		res, err := s.sup.Jobs().Yield(ctx, p.job, openHandsPoll)
		if err != nil {
			return jobChunk{}, false, err
		}
		if !res.Running || res.Waiting != nil {
			break
		}
		info, err := s.sup.Jobs().Get(p.job)
		if err != nil {
			return jobChunk{}, false, err
		}
		now := time.Now()
		if info.StdoutBytes != seen {
			seen, lastChange = info.StdoutBytes, now
		}
		if hard > 0 && now.Sub(begin) >= hard {
			timedOut = true
			break
		}
		if hard == 0 && now.Sub(lastChange) >= openHandsNoChange {
			break
		}
	}
	c, err := s.readSince(ctx, p.job, p.read, openHandsLimit(s.sup.Bounds()))
	return c, timedOut, err
}

// openHandsText is the observation as OpenHands' to_agent_observation
// writes it: prefix, output, suffix, the working directory, the exit code.
func openHandsText(c jobChunk, command string, isInput, continued bool, key string, timedOut, stopped bool, hard time.Duration) string {
	view := c.view
	if isInput && key == "" {
		// The terminal echoes the input, as tmux's pane does; OpenHands
		// removes the command's echo from the output.
		view = strings.TrimLeft(strings.TrimPrefix(strings.TrimLeft(view, " \t\r\n"), command), " \t\r\n")
	}
	switch {
	case c.ended && c.result != nil:
		code := openHandsExitCode(*c.result)
		suffix := fmt.Sprintf("\n[The command completed with exit code %d.]", code)
		if key != "" {
			suffix = fmt.Sprintf("\n[The command completed with exit code %d. CTRL+%s was sent.]", code, strings.ToUpper(key[2:]))
		}
		if c.result.ExitCode == nil || c.result.Kill.Processes > 0 {
			suffix += "\n" + c.result.Status() // corral's account of how it ended
		}
		if stopped {
			suffix += "\n[corral: CTRL+Z stopped the command; this terminal has no job control to resume it, so it was killed with its process tree.]"
		}
		text := openHandsOutput(view, suffix)
		if c.result.Cwd != "" {
			text += "\n[Current working directory: " + c.result.Cwd + "]"
		}
		return text + fmt.Sprintf("\n[Command finished with exit code %d]", code)
	case c.waiting != nil:
		return continuedPrefix(continued) + openHandsOutput(view, fmt.Sprintf("\n[The command is %s. By setting `is_input` to `true`, you can send text to its STDIN, "+
			"or send keys (\"C-c\", \"C-z\", \"C-d\") to interrupt/kill it.]", c.waiting.Describe()))
	case timedOut:
		return continuedPrefix(continued) + openHandsOutput(view, fmt.Sprintf("\n[The command timed out after %g seconds. %s]", hard.Seconds(), openHandsTimeoutMessage))
	}
	return continuedPrefix(continued) + openHandsOutput(view, fmt.Sprintf("\n[The command has no new output after %g seconds. %s]",
		openHandsNoChange.Seconds(), openHandsTimeoutMessage))
}

func continuedPrefix(continued bool) string {
	if continued {
		return "[Below is the output of the previous command.]\n"
	}
	return ""
}

// openHandsOutput is the output without trailing space, then the suffix.
func openHandsOutput(view, suffix string) string {
	return strings.TrimRight(view, " \t\r\n") + suffix
}

// openHandsExitCode is the exit code as the shell of OpenHands' terminal
// reports it ($?): the command's, or 128 and the signal's number for a
// command killed by a signal (-1 when neither is known).
func openHandsExitCode(r supervisor.Result) int {
	if r.ExitCode != nil {
		return *r.ExitCode
	}
	if n, ok := signalNumbers[r.Signal]; ok {
		return 128 + n
	}
	return -1
}

// signalNumbers are the Linux numbers of the signals a command is commonly
// killed by (signal(7)).
var signalNumbers = map[string]int{"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGABRT": 6, "SIGKILL": 9,
	"SIGSEGV": 11, "SIGPIPE": 13, "SIGALRM": 14, "SIGTERM": 15}

// controlKey is the byte of a special key C-a … C-z (OpenHands'
// _is_special_key: "C-" and one more character).
func controlKey(command string) ([]byte, bool) {
	if len(command) != 3 || !strings.HasPrefix(command, "C-") {
		return nil, false
	}
	c := command[2] | 0x20 // lower case
	if c < 'a' || c > 'z' {
		return nil, false
	}
	return []byte{c - 'a' + 1}, true
}
