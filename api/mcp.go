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
	// Env, Stdin and the policies are /v1/exec's.
	Env          map[string]string `json:"env,omitempty" jsonschema:"environment variables to set for this command"`
	Stdin        string            `json:"stdin,omitempty" jsonschema:"text written to the command's stdin, which is then closed (default: empty)"`
	StdoutPolicy string            `json:"stdoutPolicy,omitempty" jsonschema:"which part of stdout to keep when it is cut: head (default), tail or head+tail"`
	StderrPolicy string            `json:"stderrPolicy,omitempty" jsonschema:"which part of stderr to keep when it is cut: tail (default), head or head+tail"`
	// Session, Restart and Yield: the state that carries across calls.
	Session string   `json:"session,omitempty" jsonschema:"corral session to run in (default: this MCP session's own)"`
	Restart bool     `json:"restart,omitempty" jsonschema:"reset the session first: back to the start directory and environment"`
	Yield   *float64 `json:"yield,omitempty" jsonschema:"seconds after which a command still running is handed over as a background job (job_wait, job_output read it); 0 or absent waits for the end"`
	// Background, Lifetime and Interactive start a background job instead.
	Background  bool     `json:"background,omitempty" jsonschema:"start a background job and return its ID at once instead of waiting for the end"`
	Lifetime    *float64 `json:"lifetime,omitempty" jsonschema:"background only: seconds before the job is killed"` // likewise
	Interactive bool     `json:"interactive,omitempty" jsonschema:"keep stdin open for job_input: with background: true, or with yield: N (the call returns at the end, after N seconds, or as soon as the command waits for input)"`
	// TTY, Cols and Rows run the command on a terminal.
	TTY  bool `json:"tty,omitempty" jsonschema:"run the command on a terminal (a PTY): for programs that need one (prompts, REPLs, editors, pagers, full-screen programs). One output stream; with yield the call returns as soon as the program waits for input, and job_input answers it (raw bytes: \u0003 is Ctrl-C, \u001b an Escape); job_screen shows the screen"`
	Cols int  `json:"cols,omitempty" jsonschema:"terminal columns with tty: 120 by default"`
	Rows int  `json:"rows,omitempty" jsonschema:"terminal rows with tty: 40 by default"`
	// Limits caps the command's resources, at most the server's.
	Limits *LimitsRequest `json:"limits,omitempty" jsonschema:"resource limits of the command's whole process tree, at most the server's: memoryBytes, cpus (1.5 = one and a half CPUs), pids (tasks)"`
	// Description is what harnesses send to say what a command does; it is
	// accepted and not used.
	Description string `json:"description,omitempty" jsonschema:"what the command does, in a few words (accepted and not used)"`
}

// bashSchema is BashInput's schema, with plain types, and with the
// configured ranges of timeout and lifetime in their descriptions.
func bashSchema(b supervisor.Bounds) (*jsonschema.Schema, error) {
	sch, err := inputSchema[BashInput]()
	if err != nil {
		return nil, err
	}
	sch.Properties["timeout"].Description = fmt.Sprintf("timeout in seconds (not milliseconds): %g by default, %g to %g allowed",
		supervisor.DefaultTimeout.Seconds(), supervisor.MinTimeout.Seconds(), b.MaxTimeout.Seconds())
	sch.Properties["lifetime"].Description = fmt.Sprintf("background only: seconds before the job is killed, %g (%s) by default, %g to %g (%s) allowed",
		supervisor.DefaultJobLifetime.Seconds(), minutes(supervisor.DefaultJobLifetime),
		supervisor.MinTimeout.Seconds(), b.MaxJobLifetime.Seconds(), hours(b.MaxJobLifetime))
	return sch, nil
}

// bashDescription is what the model reads about bash: under 800 characters
// (longer descriptions are cut or skimmed by harnesses), with the numbers
// of spec §2 verbatim; the details are in the server's instructions and in
// the other tools' descriptions. On a face without MCP sessions it says that
// state carries only under a named session.
func bashDescription(b supervisor.Bounds, face mcpFace) string {
	state := "The working directory and exported variables carry over to your next bash call; restart: true resets them."
	if face == faceSessionless {
		state = `This connection has no MCP session: the working directory and exported variables carry over only when every call passes the same session: "name".`
	}
	return fmt.Sprintf(`Run a shell command with bash -c and return its output when it ends. timeout is in seconds: %g by default, %g–%g allowed; at the timeout the whole process tree is killed. Processes left running are killed when the shell exits: start servers and watchers with background: true (lifetime %s by default, %g s to %s), then use job_output, job_input, job_wait, job_kill. yield: N hands a command still running after N s over as such a job. %s Each stream is bounded to %s and %s lines (stdout keeps its head, stderr its tail); a [truncated: ...] marker names a spill file of up to %s: read_output pages it, grep_output searches it.`,
		supervisor.DefaultTimeout.Seconds(), supervisor.MinTimeout.Seconds(), b.MaxTimeout.Seconds(),
		minutes(supervisor.DefaultJobLifetime), supervisor.MinTimeout.Seconds(), hours(b.MaxJobLifetime),
		state, size(int64(b.Budget.MaxBytes)), thousands(b.Budget.MaxLines), size(b.SpillMaxBytes))
}

// instructions are the server's instructions (the initialize result): how
// the tools work together, with the details bash's description leaves out.
func instructions(b supervisor.Bounds, face mcpFace) string {
	session := "Each MCP session is a corral session of its own: cwd and exported variables carry from one bash call to the next (each call is a fresh shell; functions and aliases do not carry)."
	if face == faceSessionless {
		session = `This endpoint serves calls without an MCP session (protocol 2026-07-28 or a plain tools/call): nothing carries between calls unless each names the same session ("session": "name"); the result says so when a call names none.`
	}
	return fmt.Sprintf(`corral runs shell commands in a containment it can always kill completely and returns bounded, honest results. %s

bash returns the stdout view, then the stderr view after a [stderr] line, then one status line: the exit code, or how the command was stopped (timed out, aborted, killed by a signal) and how many processes were killed. A cut stream carries a [truncated: ...] marker saying what was kept out of how much; a fuller copy is in the spill file it names (also stdoutInfo.spillPath / stderrInfo.spillPath): read it with read_output (windows of %s lines / %d KiB, lines clipped at %s characters) or grep_output rather than re-running the command. Narrowing the command (grep, head, tail, --quiet) is cheaper still.

%s A job belongs to the MCP session (or token) that started it; no other client sees it. Jobs are also resources corral://jobs/{id}. history lists this session's last results.`,
		session, thousands(budget.SearchMaxLines), budget.SearchMaxBytes>>10, thousands(budget.MaxLineChars), backgroundDescription(b))
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

// newMCPServer builds the MCP server of one face with its tools; their
// descriptions and schemas state the supervisor's configured limits
// (Supervisor.Bounds), and what the face can carry.
func (s *Server) newMCPServer(face mcpFace) *mcp.Server {
	switch s.profile {
	case ProfileClaudeCode:
		return s.newClaudeServer(face)
	case ProfileCodex:
		return s.newCodexServer(face)
	case ProfileOpenHands:
		return s.newOpenHandsServer(face)
	}
	b := s.sup.Bounds()
	opts := &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}, Instructions: instructions(b, face)}
	if face != faceSessionless {
		// Job events reach a session that set a logging level
		// (mcp_resources.go); without a session there is no stream to
		// carry them, so the sessionless face does not offer logging.
		opts.Capabilities.Logging = &mcp.LoggingCapabilities{}
	}
	s.jobResourceOptions(opts, face)
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral", Title: "corral", Version: s.version}, opts)
	s.addJobResources(srv, face)
	if s.toolInputs == nil {
		s.toolInputs = make(map[string]reflect.Type)
	}
	srv.AddReceivingMiddleware(s.logToolCalls, s.strictArguments, s.startNotifierOnSetLevel)
	bashIn, err := bashSchema(b)
	if err != nil {
		panic(err) // BashInput is fixed: a test fails first
	}
	addTool(s, srv, &mcp.Tool{Name: ToolBash, Title: "Run a shell command", Description: bashDescription(b, face),
		InputSchema: bashIn, OutputSchema: bashOutputSchema(),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)}}, s.bashTool)
	s.addJobTools(srv, b)
	addTool(s, srv, &mcp.Tool{Name: ToolReadOutput, Title: "Read a spill file", Description: readDescription(b),
		Annotations: readOnly()}, s.readTool)
	addTool(s, srv, &mcp.Tool{Name: ToolGrepOutput, Title: "Search a spill file", Description: grepDescription,
		Annotations: readOnly()}, s.grepTool)
	s.addHistoryTool(srv, face)
	return srv
}

func ptr[T any](v T) *T { return &v }

// readOnly annotates a tool that changes nothing.
func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
}

// addTool adds a typed tool to srv and records its input type, against
// which strictArguments checks the raw arguments of each call.
// Its input schema, unless t has one, is In's with plain types.
func addTool[In, Out any](s *Server, srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	s.toolInputs[t.Name] = reflect.TypeFor[In]()
	if t.InputSchema == nil {
		sch, err := inputSchema[In]()
		if err != nil {
			panic(err) // the input types are fixed: a test fails first
		}
		t.InputSchema = sch
	}
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
// job instead, and with interactive and yield an interactive job it waits
// for. The structured content is the Result, or the JobStarted of a
// background job (bashOutputSchema covers both).
func (s *Server) bashTool(ctx context.Context, req *mcp.CallToolRequest, in BashInput) (*mcp.CallToolResult, any, error) {
	owner := s.mcpOwner(req)
	if in.Interactive && !in.Background && in.Yield != nil {
		return s.bashInteractive(ctx, req, in, owner)
	}
	if in.Background || in.Lifetime != nil || in.Interactive {
		return s.bashBackground(in, owner)
	}
	e, err := in.exec()
	if err != nil {
		return nil, nil, toolError(err)
	}
	e.Session = cmp.Or(in.Session, s.mcpSession(req))
	r, err := e.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		s.metrics.outcome(FaceMCP, OutcomeInvalid)
		return nil, nil, toolError(err)
	}
	r.Owner = owner // a yield hands the command over as its job
	ctx, end := s.callContext(ctx, req)
	defer end()
	stop := func() {}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		p := &progress{ctx: ctx, session: req.Session, token: tok, every: s.beat, last: time.Now()}
		r.OnEvent = p.event
		stop = keepalive(s.beat, p.keepalive)
	}
	res, err := s.run(ctx, FaceMCP, r)
	stop()
	if err != nil {
		return nil, nil, toolError(err)
	}
	text := res.Text()
	if e.Session == "" {
		text += "\n" + statelessNote
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
}

// statelessNote ends the text of a bash call that ran without a session: on
// a transport without MCP sessions nothing carries to the next call.
const statelessNote = `[corral: this call has no MCP session and named none, so its working directory and exported variables do not carry to the next call; pass "session": "name" on every call to keep them]`

// exec is the /v1/exec request of a bash call (without its session).
func (in BashInput) exec() (ExecRequest, error) {
	tty, err := in.tty()
	if err != nil {
		return ExecRequest{}, err
	}
	e := ExecRequest{Command: in.Command, Timeout: in.Timeout, Cwd: in.Cwd, Env: in.Env, Yield: in.Yield,
		ResetSession: in.Restart, Limits: in.Limits, StdoutPolicy: in.StdoutPolicy, StderrPolicy: in.StderrPolicy, TTY: tty}
	if in.Stdin != "" {
		e.Stdin = &in.Stdin
	}
	return e, nil
}

// tty returns the terminal bash asked for: nil without tty: true.
func (in BashInput) tty() (*supervisor.TTYSize, error) {
	if !in.TTY {
		if in.Cols != 0 || in.Rows != 0 {
			return nil, errorf(ErrInvalidArgument, "cols and rows need tty: true")
		}
		return nil, nil
	}
	return &supervisor.TTYSize{Cols: in.Cols, Rows: in.Rows}, nil
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
