package api

import (
	"cmp"
	"context"
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

// MCP tool names.
const (
	ToolBash       = "bash"
	ToolReadOutput = "read_output"
	ToolGrepOutput = "grep_output"
)

// BashInput is the arguments of the MCP tool bash.
type BashInput struct {
	Command string   `json:"command" jsonschema:"the shell command line, run with bash -c"`
	Timeout *float64 `json:"timeout,omitempty" jsonschema:"timeout in seconds"` // the schema states the configured range (bashSchema)
	Cwd     string   `json:"cwd,omitempty" jsonschema:"working directory for this command (default: where the session's last command ended)"`
	// Session, Restart and Yield: the state that carries across calls.
	Session string   `json:"session,omitempty" jsonschema:"corral session to run in (default: this MCP session's own)"`
	Restart bool     `json:"restart,omitempty" jsonschema:"reset the session first: back to the start directory and environment"`
	Yield   *float64 `json:"yield,omitempty" jsonschema:"seconds after which a command still running is handed over as a background job (job_output reads it); 0 or absent waits for the end"`
	// Background, Lifetime and Interactive start a background job instead.
	Background  bool     `json:"background,omitempty" jsonschema:"start a background job and return its ID at once instead of waiting for the end"`
	Lifetime    *float64 `json:"lifetime,omitempty" jsonschema:"background only: seconds before the job is killed"` // likewise
	Interactive bool     `json:"interactive,omitempty" jsonschema:"background only: keep stdin open for job_input"`
	// Limits caps the command's resources, at most the server's.
	Limits *LimitsRequest `json:"limits,omitempty" jsonschema:"resource limits of the command's whole process tree, at most the server's: memoryBytes, cpus (1.5 = one and a half CPUs), pids (tasks)"`
}

// bashSchema is BashInput's schema with the configured ranges of timeout and
// lifetime in their descriptions.
func bashSchema(b supervisor.Bounds) (*jsonschema.Schema, error) {
	sch, err := jsonschema.For[BashInput](nil)
	if err != nil {
		return nil, fmt.Errorf("api: bash schema: %w", err)
	}
	sch.Properties["timeout"].Description = fmt.Sprintf("timeout in seconds: %g by default, %g to %g allowed",
		supervisor.DefaultTimeout.Seconds(), supervisor.MinTimeout.Seconds(), b.MaxTimeout.Seconds())
	sch.Properties["lifetime"].Description = fmt.Sprintf("background only: seconds before the job is killed, %g (%s) by default, %g to %g (%s) allowed",
		supervisor.DefaultJobLifetime.Seconds(), minutes(supervisor.DefaultJobLifetime),
		supervisor.MinTimeout.Seconds(), b.MaxJobLifetime.Seconds(), hours(b.MaxJobLifetime))
	return sch, nil
}

// bashDescription states the limits verbatim, so that a model can see what
// the tool does with large output and how to get the rest (spec §2).
func bashDescription(b supervisor.Bounds) string {
	return fmt.Sprintf(`Run a shell command with bash -c and return its output when it ends.

timeout is in seconds: %g by default, %g–%g allowed. At the timeout the command's whole process tree is killed and the result says so. Processes the command leaves running in the background are killed when the shell exits; stdin is empty.

The working directory and exported variables carry over to your next bash call (each call is a fresh shell; functions and aliases do not carry); restart: true resets them. With yield: N, a command still running after N seconds keeps running as a background job, and the result says its job id.

Each stream that reaches you is bounded to %s and %s lines: stdout keeps its head (the first lines), stderr keeps its tail (the last lines), and a [truncated: ...] marker says what was kept out of how much. When a stream was cut, a fuller copy (up to %s) is saved to a spill file whose path is in the marker and in stdoutInfo.spillPath / stderrInfo.spillPath. Read it with read_output (offset/limit, windows of %s lines / %d KiB, lines clipped at %s characters) or search it with grep_output rather than re-running the command. Narrowing the command itself (grep, head, tail, --quiet) is cheaper still.

The text result is stdout, then stderr after a [stderr] line, then one status line: the exit code, or how the command was stopped (timed out, aborted, killed by a signal) and how many processes were killed.

`+backgroundDescription(b),
		supervisor.DefaultTimeout.Seconds(), supervisor.MinTimeout.Seconds(), b.MaxTimeout.Seconds(),
		size(int64(b.Budget.MaxBytes)), thousands(b.Budget.MaxLines), size(b.SpillMaxBytes),
		thousands(budget.SearchMaxLines), budget.SearchMaxBytes>>10, thousands(budget.MaxLineChars))
}

// readDescription states read_output's windows and the spill cap.
func readDescription(b supervisor.Bounds) string {
	return fmt.Sprintf(`Read a window of lines from a spill file: the fuller copy of a bash result's stdout or stderr that was cut, named in its [truncated: ...] marker and in stdoutInfo.spillPath / stderrInfo.spillPath. Only regular files under the server's data directory (its scratch directory) can be read; symlinks are not followed.

offset is the 1-based first line (default 1), limit the number of lines (default %s). A window stops at %s lines or %d KiB, whichever comes first; lines longer than %s characters are clipped, and notice counts them. content is the file's text, byte for byte (invalid UTF-8 and NUL bytes shown as U+FFFD), without line numbers. When the window did not reach the end, notice names the offset to continue from; totalLines appears once the end was reached. A spill that holds only part of the output (it stops at the spill cap, %s here) sets partial: true, and notice says which part it holds. Binary files are refused with TOOL_BINARY_CONTENT.`,
		thousands(budget.SearchMaxLines), thousands(budget.SearchMaxLines), budget.SearchMaxBytes>>10, thousands(budget.MaxLineChars),
		size(b.SpillMaxBytes))
}

var grepDescription = fmt.Sprintf(`Search a spill file (the fuller copy of a cut bash result, named in its [truncated: ...] marker and in stdoutInfo.spillPath / stderrInfo.spillPath) for lines matching a regular expression (RE2 syntax). Only regular files under the server's data directory (its scratch directory) can be searched; symlinks are not followed.

Returns matches with their 1-based line numbers, at most headLimit of them (default %d; more set truncated: true), within %d KiB; lines longer than %s characters are clipped. On a spill that holds only part of the output, partial: true and notice says which part. Use read_output with offset near a match's line to see its context.`,
	budget.DefaultHeadLimit, budget.SearchMaxBytes>>10, thousands(budget.MaxLineChars))

// size formats a byte count as the descriptions state it: "96 KiB" for a
// multiple of 1024, else "1000 bytes".
func size(n int64) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// thousands formats n with a comma every three digits ("4,000").
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// newMCPServer builds the MCP server with its tools; their descriptions and
// schemas state the supervisor's configured limits (Supervisor.Bounds).
func (s *Server) newMCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral", Version: s.version},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}})
	s.toolInputs = make(map[string]reflect.Type)
	srv.AddReceivingMiddleware(s.logToolCalls, s.strictArguments)
	b := s.sup.Bounds()
	bashIn, err := bashSchema(b)
	if err != nil {
		panic(err) // BashInput is fixed: a test fails first
	}
	addTool(s, srv, &mcp.Tool{Name: ToolBash, Description: bashDescription(b), InputSchema: bashIn}, s.bashTool)
	s.addJobTools(srv, b)
	addTool(s, srv, &mcp.Tool{Name: ToolReadOutput, Description: readDescription(b),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.readTool)
	addTool(s, srv, &mcp.Tool{Name: ToolGrepOutput, Description: grepDescription,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.grepTool)
	s.addHistoryTool(srv)
	return srv
}

// addTool adds a typed tool to srv and records its input type, against
// which strictArguments checks the raw arguments of each call.
func addTool[In, Out any](s *Server, srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	s.toolInputs[t.Name] = reflect.TypeFor[In]()
	mcp.AddTool(srv, t, h)
}

// strictArguments checks a tool call's raw arguments with checkStrict
// before the SDK decodes them (which, like encoding/json, would let the
// last of two duplicate keys win): a call they fail gets an
// INVALID_ARGUMENT tool error and no tool runs. A tool added without
// addTool is checked for all but its key names.
func (s *Server) strictArguments(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && len(call.Params.Arguments) > 0 {
			if err := checkStrict(call.Params.Arguments, s.toolInputs[call.Params.Name]); err != nil {
				res := &mcp.CallToolResult{}
				res.SetError(toolError(err))
				return res, nil
			}
		}
		return next(ctx, method, req)
	}
}

// toolError makes err a tool error whose text is its wire code and wire
// message ("INVALID_ARGUMENT: timeout must be ..."), so the model can tell
// a bad argument from a missing file. errors.Is and errors.As still reach
// err.
func toolError(err error) error { return codedError{err} }

type codedError struct{ err error }

func (e codedError) Error() string { return Code(e.err) + ": " + Message(e.err) }
func (e codedError) Unwrap() error { return e.err }

// bashTool runs one command. Cancelling the request (ctx:
// notifications/cancelled) aborts it and kills its tree after the grace; a
// client that disconnected from the POST that carried the call gets it
// killed at once (callContext). Live output, and a heartbeat after
// Config.Heartbeat of silence, go out as progress notifications when the
// client asked for them with a progress token. With background it starts a
// job instead. The structured content is the Result, or the JobStarted of
// a background job (hence no fixed output schema).
func (s *Server) bashTool(ctx context.Context, req *mcp.CallToolRequest, in BashInput) (*mcp.CallToolResult, any, error) {
	if in.Background || in.Lifetime != nil || in.Interactive {
		return s.bashBackground(in)
	}
	r, err := ExecRequest{Command: in.Command, Timeout: in.Timeout, Cwd: in.Cwd, Yield: in.Yield,
		Session: cmp.Or(in.Session, s.mcpSession(req)), ResetSession: in.Restart, Limits: in.Limits}.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		s.metrics.outcome(OutcomeInvalid)
		return nil, nil, toolError(err)
	}
	ctx, end := s.callContext(ctx, req)
	defer end()
	stop := func() {}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		p := &progress{ctx: ctx, session: req.Session, token: tok, every: s.beat, last: time.Now()}
		r.OnEvent = p.event
		stop = keepalive(s.beat, p.keepalive)
	}
	res, err := s.run(ctx, r)
	stop()
	if err != nil {
		return nil, nil, toolError(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text()}}}, res, nil
}

// progress forwards live output as progress notifications, and after
// Config.Heartbeat of silence sends one without output (a heartbeat, so a
// client that resets its timeout on progress keeps waiting for a quiet
// command). Events come from one goroutine at a time, heartbeats from
// another; mu serialises them. Volume is bounded by the supervisor's live
// cap. Progress counts notifications, so it increases.
type progress struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any
	every   time.Duration

	mu     sync.Mutex
	last   time.Time // guarded by mu; when the last notification went out
	n      float64   // guarded by mu
	failed bool      // guarded by mu
}

func (p *progress) event(ev supervisor.Event) {
	var msg string
	switch ev.Event {
	case supervisor.EventOutput:
		msg = ev.Data
	case supervisor.EventCapped:
		msg = fmt.Sprintf("[corral: live %s capped; the result says what was kept]\n", ev.Stream)
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notifyLocked(msg, mcp.Meta{"stream": ev.Stream, "seq": ev.Seq, "event": ev.Event})
}

// keepalive sends a heartbeat when nothing went out for p.every, and
// returns when the next one is due.
func (p *progress) keepalive() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) >= p.every {
		p.notifyLocked("", mcp.Meta{"event": EventKeepalive})
	}
	return p.last.Add(p.every)
}

func (p *progress) notifyLocked(msg string, meta mcp.Meta) {
	p.last = time.Now()
	if p.failed {
		return
	}
	p.n++
	err := p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token,
		Progress:      p.n,
		Message:       msg,
		Meta:          meta,
	})
	// A client that cannot take notifications gets none; its request
	// still gets the result.
	p.failed = err != nil
}

func (s *Server) readTool(ctx context.Context, req *mcp.CallToolRequest, in ReadRequest) (*mcp.CallToolResult, budget.ReadResult, error) {
	res, err := s.readSpill(in)
	if err != nil {
		return nil, budget.ReadResult{}, toolError(err)
	}
	text := res.Content
	if res.Notice != "" {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "[" + res.Notice + "]"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
}

func (s *Server) grepTool(ctx context.Context, req *mcp.CallToolRequest, in GrepRequest) (*mcp.CallToolResult, budget.GrepResult, error) {
	res, err := s.grepSpill(in)
	if err != nil {
		return nil, budget.GrepResult{}, toolError(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: jsonText(res)}}}, res, nil
}

// mcpSession names the corral session of an MCP call that names none: the
// MCP session's own (a streamable-HTTP Mcp-Session-Id, or the one session
// of corral mcp over stdio), or "" (stateless) for a call that has no MCP
// session (protocol 2026-07-28, or a sessionless POST).
func (s *Server) mcpSession(req *mcp.CallToolRequest) string {
	if req == nil || req.Session == nil {
		return ""
	}
	if id := req.Session.ID(); id != "" {
		return sessionName(id)
	}
	return s.stdioSession
}

// sessionName makes an MCP session ID a corral session name: "mcp-" and the
// ID's letters, digits, '.', '_' and '-', at most 128 bytes in all.
func sessionName(id string) string {
	b := []byte("mcp-")
	for i := 0; i < len(id) && len(b) < 128; i++ {
		c := id[i]
		if c == '.' || c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b = append(b, c)
		}
	}
	return string(b)
}
