package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/supervisor"
)

// The codex profile serves Codex's unified exec tools, exec_command and
// write_stdin, with their argument schemas, descriptions and result text
// as Codex ships them (docs/profiles.md), over corral's jobs: bounds,
// markers, spill files, tree kill, journal, sessions and tenancy are
// corral's.
//
// Source: github.com/openai/codex, codex-rs/core/src/tools/spec.rs at
// commit b8a1c8f8c4671c9a534eede7f32f11f5c9a5f938
// (create_exec_command_tool, create_write_stdin_tool: names, descriptions,
// property descriptions); codex-rs/core/src/tools/handlers/unified_exec.rs
// at 010d3e6290ba820300d5d173051df405d3df7e1a (format_response: the result
// text; the defaults 10000 ms for exec_command and 250 ms for
// write_stdin); codex-rs/core/src/unified_exec/process_manager.rs at
// 001f15e971d47ab5e484ced35ba820332934c9ee (the yield clamps: 250 to
// 30000 ms, an empty poll at least 5000 ms; a write to a session without a
// tty is refused); codex-rs/core/src/unified_exec/errors.rs at
// 71163530a46dc568775f9ee95a9b57de3385cd9a (the error sentences).
// api/testdata/profiles/codex holds the expected tool list and says what
// differs.

// Codex's tool names.
const (
	ToolCodexExecCommand = "exec_command"
	ToolCodexWriteStdin  = "write_stdin"
)

// Codex's unified exec bounds, in milliseconds and tokens.
const (
	codexExecYieldMs      = 10000 // exec_command's default yield
	codexWriteYieldMs     = 250   // write_stdin's default yield
	codexMinYieldMs       = 250
	codexMinEmptyYieldMs  = 5000 // an empty write_stdin (a poll)
	codexMaxYieldMs       = 30000
	codexDefaultMaxTokens = 10000
	codexBytesPerToken    = 4 // Codex's approx_token_count: bytes / 4
)

// CodexExecInput is the arguments of Codex's exec_command.
type CodexExecInput struct {
	Cmd             string   `json:"cmd"`
	Workdir         string   `json:"workdir,omitempty"`
	Shell           string   `json:"shell,omitempty"`
	Login           *bool    `json:"login,omitempty"`
	TTY             bool     `json:"tty,omitempty"`
	YieldTimeMs     *float64 `json:"yield_time_ms,omitempty"`
	MaxOutputTokens *float64 `json:"max_output_tokens,omitempty"`
	// SandboxPermissions, Justification and PrefixRule are Codex's
	// approval arguments, which its models send: accepted and unused
	// (corral has no sandbox to escalate out of; its containment always
	// applies).
	SandboxPermissions string   `json:"sandbox_permissions,omitempty"`
	Justification      string   `json:"justification,omitempty"`
	PrefixRule         []string `json:"prefix_rule,omitempty"`
}

// CodexWriteInput is the arguments of Codex's write_stdin.
type CodexWriteInput struct {
	SessionID       float64  `json:"session_id"`
	Chars           string   `json:"chars,omitempty"`
	YieldTimeMs     *float64 `json:"yield_time_ms,omitempty"`
	MaxOutputTokens *float64 `json:"max_output_tokens,omitempty"`
}

// codexSessions maps Codex's session IDs (small integers, from 1, never
// reused) to the corral jobs of commands still running when their call
// returned. An entry goes when a call reports its job's end, or when its
// job was forgotten (swept at each new entry).
type codexSessions struct {
	mu   sync.Mutex
	next int               // guarded by mu
	jobs map[int]codexProc // guarded by mu
}

// codexProc is one Codex session: its job, and the stdout offset the next
// call reads from.
type codexProc struct {
	job  string
	read int64
}

func (c *codexSessions) add(s *supervisor.Supervisor, job string, read int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs == nil {
		c.jobs = map[int]codexProc{}
	}
	for id, p := range c.jobs {
		if !s.Jobs().Has(p.job) {
			delete(c.jobs, id)
		}
	}
	c.next++
	c.jobs[c.next] = codexProc{job: job, read: read}
	return c.next
}

func (c *codexSessions) get(id int) (codexProc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.jobs[id]
	return p, ok
}

// update records where session id's next read starts, or forgets it once
// its end was reported.
func (c *codexSessions) update(id int, read int64, ended bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ended {
		delete(c.jobs, id)
		return
	}
	if p, ok := c.jobs[id]; ok {
		p.read = read
		c.jobs[id] = p
	}
}

// codexObject is an object schema of Codex's JsonSchema::Object: the
// properties, required, and additionalProperties false.
func codexObject(required []string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: props, Required: required, AdditionalProperties: falseSchema}
}

// newCodexServer builds the MCP server of the codex profile.
func (s *Server) newCodexServer(face mcpFace) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral", Title: "corral", Version: s.version},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}, Instructions: codexInstructions(s.sup.Bounds())})
	if s.toolInputs == nil {
		s.toolInputs = map[string]reflect.Type{}
	}
	srv.AddReceivingMiddleware(s.logToolCalls, s.strictArguments)
	yieldDesc := prop("number", "How long to wait (in milliseconds) for output before yielding.")
	tokensDesc := prop("number", "Maximum number of tokens to return. Excess output will be truncated.")
	addTool(s, srv, &mcp.Tool{Name: ToolCodexExecCommand,
		Description: "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
		InputSchema: codexObject([]string{"cmd"}, map[string]*jsonschema.Schema{
			"cmd":               prop("string", "Shell command to execute."),
			"workdir":           prop("string", "Optional working directory to run the command in; defaults to the turn cwd."),
			"shell":             prop("string", "Shell binary to launch. Defaults to the user's default shell."),
			"login":             prop("boolean", "Whether to run the shell with -l/-i semantics. Defaults to true."),
			"tty":               prop("boolean", "Whether to allocate a TTY for the command. Defaults to false (plain pipes); set to true to open a PTY and access TTY process."),
			"yield_time_ms":     yieldDesc,
			"max_output_tokens": tokensDesc,
			"sandbox_permissions": prop("string", "Accepted for compatibility and ignored: there is no sandbox to leave here, "+
				"every command runs under the same containment."),
			"justification": prop("string", "Accepted for compatibility and ignored (see sandbox_permissions)."),
			"prefix_rule": {Type: "array", Items: &jsonschema.Schema{Type: "string"},
				Description: "Accepted for compatibility and ignored (see sandbox_permissions)."},
		})}, s.codexExec)
	addTool(s, srv, &mcp.Tool{Name: ToolCodexWriteStdin,
		Description: "Writes characters to an existing unified exec session and returns recent output.",
		InputSchema: codexObject([]string{"session_id"}, map[string]*jsonschema.Schema{
			"session_id":        prop("number", "Identifier of the running unified exec session."),
			"chars":             prop("string", "Bytes to write to stdin (may be empty to poll)."),
			"yield_time_ms":     yieldDesc,
			"max_output_tokens": tokensDesc,
		})}, s.codexWrite)
	return srv
}

// codexInstructions are the codex profile's server instructions: what
// corral does under Codex's tools, and where it differs.
func codexInstructions(b supervisor.Bounds) string {
	return fmt.Sprintf(`Codex's exec_command and write_stdin, run by corral. exec_command returns when the command exits, when yield_time_ms passes (%d to %d ms), or as soon as a command on a tty waits for input; a command still running then goes on as the session whose ID the result names, until it ends, write_stdin sends C-c (\u0003) or Ctrl-D (\u0004), or its lifetime of %s passes, and its whole process tree is killed then. Each command starts in the server's working directory (or workdir) with the server's environment: nothing carries from one command to the next. Output is stdout and stderr as one stream, bounded to max_output_tokens (about %d bytes a token) and to %s / %s lines a call; a cut keeps the head and the tail with a [truncated: ...] marker between them. Without tty, stdin is empty and write_stdin can only poll.`,
		codexMinYieldMs, codexMaxYieldMs, minutes(supervisor.DefaultJobLifetime), codexBytesPerToken,
		size(int64(b.Budget.MaxBytes)), thousands(b.Budget.MaxLines))
}

// codexYield clamps a yield_time_ms as Codex does (clamp_yield_time): absent
// is def; NaN is refused.
func codexYield(ms *float64, def, lo float64) (time.Duration, error) {
	v := def
	if ms != nil {
		v = *ms
	}
	if math.IsNaN(v) {
		return 0, errorf(ErrInvalidArgument, "yield_time_ms must be a number of milliseconds, got NaN")
	}
	v = math.Min(math.Max(v, lo), codexMaxYieldMs)
	return time.Duration(v * float64(time.Millisecond)), nil
}

// codexLimit is the byte bound of max_output_tokens (absent: Codex's
// 10000), at most the server's budget of a stream.
func (s *Server) codexLimit(tokens *float64) (budget.Limits, error) {
	b := s.sup.Bounds().Budget
	n := float64(codexDefaultMaxTokens)
	if tokens != nil {
		n = *tokens
	}
	if !(n >= 1) {
		return budget.Limits{}, errorf(ErrInvalidArgument, "max_output_tokens must be 1 or more, got %v", n)
	}
	return budget.Limits{MaxBytes: int(math.Min(n*codexBytesPerToken, float64(b.MaxBytes))), MaxLines: b.MaxLines}, nil
}

// codexArgv is the program exec_command runs, as Codex's get_command: shell
// (the server's when absent) with -lc, or -c with login: false, and the
// command.
func (s *Server) codexArgv(in CodexExecInput) []string {
	shell := cmp.Or(in.Shell, s.sup.Bounds().Shell)
	flag := "-lc"
	if in.Login != nil && !*in.Login {
		flag = "-c"
	}
	return []string{shell, flag, in.Cmd}
}

// codexExec is exec_command: the command starts as a job (on a terminal
// with tty), its stderr joined to its stdout as Codex reads both into one
// stream, and the call returns at its end, at the yield, or, on a
// terminal, as soon as it waits for input. A command still running gets a
// session ID for write_stdin. Cancelling the call kills the tree.
func (s *Server) codexExec(ctx context.Context, req *mcp.CallToolRequest, in CodexExecInput) (*mcp.CallToolResult, any, error) {
	begin := time.Now()
	yield, err := codexYield(in.YieldTimeMs, codexExecYieldMs, codexMinYieldMs)
	if err != nil {
		return nil, nil, toolError(err)
	}
	lim, err := s.codexLimit(in.MaxOutputTokens)
	if err != nil {
		return nil, nil, toolError(err)
	}
	if in.Cmd == "" {
		return nil, nil, toolError(errorf(ErrInvalidArgument, "cmd is empty"))
	}
	jr := supervisor.JobRequest{Request: supervisor.Request{Command: in.Cmd, Argv: s.codexArgv(in), Dir: in.Workdir,
		Session: s.mcpSession(req), Label: ToolCodexExecCommand, Owner: s.mcpOwner(req), StdoutPolicy: budget.PolicyHeadTail, JoinStderr: true}}
	if in.TTY {
		jr.TTY = &supervisor.TTYSize{}
	}
	st, err := s.startJob(FaceMCP, jr)
	if err != nil {
		return nil, nil, toolError(err)
	}
	ctx, end := s.callContext(ctx, req)
	defer end()
	if _, err := s.sup.Jobs().Yield(ctx, st.ID, yield); err != nil {
		s.sup.Jobs().Kill(st.ID) // the call is gone: so is its command
		return nil, nil, toolError(err)
	}
	c, err := s.readSince(ctx, st.ID, 0, lim)
	if err != nil {
		return nil, nil, toolError(err)
	}
	id := 0
	if !c.ended {
		id = s.codex.add(s.sup, st.ID, c.next)
	}
	return textResult(c.codexText(begin, id)), nil, nil
}

// codexWrite is write_stdin: chars typed into the session's terminal (a
// session without one takes only polls, as in Codex), then the call returns
// at the end, at the yield, or as soon as the command waits for input again.
func (s *Server) codexWrite(ctx context.Context, req *mcp.CallToolRequest, in CodexWriteInput) (*mcp.CallToolResult, any, error) {
	begin := time.Now()
	id := int(in.SessionID)
	p, ok := s.codex.get(id)
	if !ok || float64(id) != in.SessionID || s.ownJob(s.mcpOwner(req), p.job) != nil {
		return nil, nil, toolError(errorf(ErrNotFound, "write_stdin failed: Unknown process id %v", in.SessionID))
	}
	lim, err := s.codexLimit(in.MaxOutputTokens)
	if err != nil {
		return nil, nil, toolError(err)
	}
	lo := float64(codexMinYieldMs)
	if in.Chars == "" {
		lo = codexMinEmptyYieldMs
	}
	yield, err := codexYield(in.YieldTimeMs, codexWriteYieldMs, lo)
	if err != nil {
		return nil, nil, toolError(err)
	}
	ctx, end := s.callContext(ctx, req)
	defer end()
	if in.Chars == "" {
		_, err = s.sup.Jobs().Yield(ctx, p.job, yield)
	} else {
		if info, err := s.sup.Jobs().Get(p.job); err == nil && info.TTY == nil {
			return nil, nil, toolError(errorf(ErrInvalidArgument,
				"write_stdin failed: stdin is closed for this session; rerun exec_command with tty=true to keep stdin open"))
		}
		_, err = s.sup.Jobs().Exchange(ctx, p.job, supervisor.Stdout, []byte(in.Chars), false, yield)
		if errors.Is(err, supervisor.ErrJobStdin) {
			err = nil // it ended before the write: its end is the answer
		}
	}
	if err != nil {
		return nil, nil, toolError(err)
	}
	c, err := s.readSince(ctx, p.job, p.read, lim)
	if err != nil {
		return nil, nil, toolError(err)
	}
	s.codex.update(id, c.next, c.ended)
	return textResult(c.codexText(begin, id)), nil, nil
}

// jobChunk is what one call read of a job (a Codex session, an OpenHands
// command): the output view, where the next read starts, and the end or the
// wait.
type jobChunk struct {
	view    string
	covered int64 // bytes of the stream this call read (the original count)
	next    int64
	ended   bool
	result  *supervisor.Result
	waiting *supervisor.Waiting
}

// readSince reads what job printed from byte from on: every byte the
// server still holds, past the one-window pages of Jobs.Output, shaped to
// lim keeping the head and the tail, with corral's marker between them (a
// full-screen program's screen instead of the bytes that drew it).
func (s *Server) readSince(ctx context.Context, job string, from int64, lim budget.Limits) (jobChunk, error) {
	info, err := s.sup.Jobs().Get(job)
	if err != nil {
		return jobChunk{}, err
	}
	var data strings.Builder
	var skipped int64
	var last supervisor.JobOutput
	for after := from; ; {
		out, err := s.sup.Jobs().Output(ctx, job, supervisor.Stdout, after, 0)
		if err != nil {
			return jobChunk{}, err
		}
		data.WriteString(out.Data)
		skipped += out.SkippedBytes
		last, after = out, out.Next
		if out.Next >= info.StdoutBytes || out.Next == out.After && out.SkippedBytes == 0 {
			break
		}
	}
	c := jobChunk{covered: last.Next - from, next: last.Next, ended: last.State == supervisor.JobExited,
		result: last.Result, waiting: last.Waiting}
	if skipped > 0 {
		c.view = fmt.Sprintf("[skipped %d bytes: more came since the previous call than the server holds]\n", skipped)
	}
	if last.Screen != nil {
		c.view += screenText(*last.Screen, "") + "\n"
		return c, nil
	}
	shaped, cut := budget.Shape([]byte(data.String()), budget.Counts{}, budget.Options{Policy: budget.PolicyHeadTail, Limits: lim})
	c.view += shaped
	if c.view != "" && !strings.HasSuffix(c.view, "\n") {
		c.view += "\n"
	}
	if c.ended && c.result != nil && c.result.StdoutInfo.SpillPath != "" && cut.Truncated {
		c.view += "[corral: a copy of this command's output is saved in " + c.result.StdoutInfo.SpillPath + "]\n"
	}
	return c, nil
}

// codexText is the chunk as Codex's format_response writes it: Chunk ID, Wall
// time, the exit code or the session line (and, beyond Codex, the wait),
// Original token count, then Output. An ended command's output ends with
// corral's status line.
func (c jobChunk) codexText(begin time.Time, session int) string {
	lines := []string{"Chunk ID: " + chunkID(), fmt.Sprintf("Wall time: %.4f seconds", time.Since(begin).Seconds())}
	view := c.view
	switch {
	case c.ended && c.result != nil:
		if c.result.ExitCode != nil {
			lines = append(lines, fmt.Sprintf("Process exited with code %d", *c.result.ExitCode))
		}
		view += c.result.Status()
	default:
		lines = append(lines, fmt.Sprintf("Process running with session ID %d", session))
		if c.waiting != nil {
			lines = append(lines, "Process "+c.waiting.Describe())
		}
	}
	lines = append(lines, fmt.Sprintf("Original token count: %d", (c.covered+codexBytesPerToken-1)/codexBytesPerToken), "Output:", view)
	return strings.Join(lines, "\n")
}

// chunkID is a Chunk ID as Codex makes them: six hex digits.
func chunkID() string {
	var b [3]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
