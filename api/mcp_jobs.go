package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/supervisor"
)

// MCP tool names of background jobs.
const (
	ToolJobOutput = "job_output"
	ToolJobInput  = "job_input"
	ToolJobKill   = "job_kill"
	ToolJobList   = "job_list"
	ToolJobWait   = "job_wait"
	ToolJobScreen = "job_screen"
)

// JobOutputInput is the arguments of the MCP tool job_output.
type JobOutputInput struct {
	ID     string  `json:"id" jsonschema:"the job ID returned by bash with background: true"`
	Stream string  `json:"stream,omitempty" jsonschema:"stdout (default), stderr, or both (stdout, then stderr after a [stderr] line)"`
	Filter string  `json:"filter,omitempty" jsonschema:"a regular expression (RE2): only the new lines matching it are returned; the others are read and dropped"`
	After  *int64  `json:"after,omitempty" jsonschema:"byte offset to read from; omit it to get what came since your previous read"`
	Wait   float64 `json:"wait,omitempty" jsonschema:"seconds to wait for new output or the end when there is none yet: 0 (default) to 30"`
}

// JobInputInput is the arguments of the MCP tool job_input.
type JobInputInput struct {
	ID   string `json:"id" jsonschema:"the ID of a job started with interactive: true"`
	Data string `json:"data,omitempty" jsonschema:"text to write to the job's stdin (include the newline a line needs)"`
	// Chars is Codex's write_stdin name for the same bytes.
	Chars string `json:"chars,omitempty" jsonschema:"the same as data, under the name Codex's write_stdin uses (raw bytes: \u0003 is Ctrl-C on a terminal); give one of the two"`
	Close bool   `json:"close,omitempty" jsonschema:"close stdin after writing (end of input)"`
	// Yield, when set, waits for the answer and returns it (stdout).
	Yield float64 `json:"yield,omitempty" jsonschema:"seconds to wait for the job's answer on stdout, 0 to 30: the call returns as soon as the job waits for input again (corral sees it blocked reading), or ends; 0 or absent returns at once"`
}

// JobIDInput is the arguments of the MCP tool job_kill.
type JobIDInput struct {
	ID string `json:"id" jsonschema:"the job ID"`
}

// JobInputResult is the structured result of job_input.
type JobInputResult struct {
	ID      string `json:"id"`
	Written int    `json:"written"`
	Closed  bool   `json:"closed"`
	// Output is the answer read with yield, as job_output returns it.
	Output *supervisor.JobOutput `json:"output,omitempty"`
}

// jobLimitsText states the job limits verbatim, as configured.
func jobLimitsText(b supervisor.Bounds) string {
	return fmt.Sprintf(`At the end of its lifetime a job is killed with its whole process tree. After it exits it stays readable for %s, then it is forgotten; sooner when more than %d exited jobs (or %s of their output) are kept, the oldest first. At most %d jobs run at once; one more is refused with RESOURCE_EXHAUSTED.`,
		minutes(b.JobRetention), b.MaxRetainedJobs, mib(b.MaxRetainedBytes), b.MaxJobs)
}

// jobWindowText states the job output windows; a job keeps the tail of
// each stream in a ring of the capture ceiling.
func jobWindowText(b supervisor.Bounds) string {
	return fmt.Sprintf(`Each read returns what the job printed since your previous read of that stream (or from the byte offset after, when given), in windows of at most %s / %s lines. A read may wait (long poll, up to %g s) for new output or the job's end. When the reader fell behind what the server still holds (the last %s of each stream), skippedBytes says how many bytes were missed.`,
		size(int64(b.Budget.MaxBytes)), thousands(b.Budget.MaxLines), supervisor.MaxOutputWait.Seconds(),
		size(int64(b.Capture.MaxBytes)))
}

// backgroundDescription is the server instructions' paragraph on jobs.
func backgroundDescription(b supervisor.Bounds) string {
	return fmt.Sprintf(`Background jobs: a dev server, a watcher or a long build must be started with background: true (a plain command's leftover processes are killed when its shell exits). bash then returns at once with the job ID and PID; read the output with job_output, wait for the end with job_wait, write stdin with job_input (only for interactive: true; otherwise stdin is empty), list jobs with job_list, stop one with job_kill. lifetime is in seconds: %s by default, %g s to %s allowed.`,
		minutes(supervisor.DefaultJobLifetime), supervisor.MinTimeout.Seconds(), hours(b.MaxJobLifetime))
}

// jobOutputDescription describes job_output with its windows.
func jobOutputDescription(b supervisor.Bounds) string {
	return fmt.Sprintf(`Read a background job's output (stdout by default, or stderr), and say whether the job is still running. %s

The text result is the output, then one status line; once the job has exited it carries the exit status, and a read that returns nothing after that is the end. An exited job stays readable for a while (see bash), then answers NOT_FOUND saying it expired.`, jobWindowText(b))
}

var jobInputDescription = fmt.Sprintf(`Write data to the stdin of a background job started with interactive: true or tty: true, and close stdin with close: true (the end of input; cat and read then see EOF; a terminal has no close: send \u0004). On a terminal the bytes are typed raw: \u0003 is Ctrl-C, \r Enter, \u001b Escape. Writing to a job that is not interactive, whose stdin was closed, or that has exited is refused with INVALID_ARGUMENT. With yield: N it waits up to N seconds for the answer on stdout and returns it (what a job_output read would) as soon as the job waits for input again (corral sees it blocked reading), so one call is one turn of an interactive program; without yield, read the answer with job_output.`)

var jobKillDescription = `Kill a background job with its whole process tree (SIGTERM, a short grace, then SIGKILL) and return its result like bash does. Killing a job that already exited returns its result.`

// jobListDescription describes job_list, with the job limits.
func jobListDescription(b supervisor.Bounds) string {
	return "List your background jobs, running and recently exited: id, command, state (running or exited), pid, startedAt, and the bytes written so far to stdout and stderr. " +
		jobLimitsText(b)
}

func minutes(d time.Duration) string { return fmt.Sprintf("%g min", d.Minutes()) }
func hours(d time.Duration) string   { return fmt.Sprintf("%g h", d.Hours()) }

// mib formats a byte count in MiB when it is a multiple of one, else as size does.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return size(n)
}

func (s *Server) addJobTools(srv *mcp.Server, b supervisor.Bounds) {
	addTool(s, srv, &mcp.Tool{Name: ToolJobOutput, Title: "Read a background job's output", Description: jobOutputDescription(b),
		Annotations: readOnly()}, s.jobOutputTool)
	addTool(s, srv, &mcp.Tool{Name: ToolJobInput, Title: "Write to a background job's stdin", Description: jobInputDescription,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}}, s.jobInputTool)
	addTool(s, srv, &mcp.Tool{Name: ToolJobWait, Title: "Wait for a background job to end", Description: jobWaitDescription(b),
		Annotations: readOnly()}, s.jobWaitTool)
	addTool(s, srv, &mcp.Tool{Name: ToolJobKill, Title: "Kill a background job", Description: jobKillDescription,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}}, s.jobKillTool)
	addTool(s, srv, &mcp.Tool{Name: ToolJobList, Title: "List background jobs", Description: jobListDescription(b),
		Annotations: readOnly()}, s.jobListTool)
	addTool(s, srv, &mcp.Tool{Name: ToolJobScreen, Title: "Show a terminal job's screen", Description: jobScreenDescription,
		Annotations: readOnly()}, s.jobScreenTool)
}

// bashBackground starts the bash tool's command as a background job.
func (s *Server) bashBackground(in BashInput, owner string) (*mcp.CallToolResult, any, error) {
	if !in.Background {
		return nil, nil, toolError(errorf(ErrInvalidArgument, "lifetime needs background: true, and interactive needs background: true or a yield"))
	}
	e, err := in.exec()
	if err != nil {
		return nil, nil, toolError(err)
	}
	e.Yield = nil // a background job returns at once
	req, err := JobRequest{ExecRequest: e, Lifetime: in.Lifetime, Interactive: in.Interactive}.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		return nil, nil, toolError(err)
	}
	req.Owner = owner
	st, err := s.startJob(FaceMCP, req)
	if err != nil {
		return nil, nil, toolError(err)
	}
	text := fmt.Sprintf("Started background job %s (pid %d). Read its output with job_output {\"id\": %q} "+
		"(add \"wait\": up to 30 seconds to wait for output); each read returns what came since the previous one.", st.ID, st.Pid, st.ID)
	if in.Interactive || in.TTY {
		text += fmt.Sprintf(" Its stdin is open: write to it with job_input {\"id\": %q, \"data\": \"...\\n\"}, close it with \"close\": true.", st.ID)
	}
	text += " Stop it with job_kill."
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, st, nil
}

func (s *Server) jobOutputTool(ctx context.Context, req *mcp.CallToolRequest, in JobOutputInput) (*mcp.CallToolResult, JobOutputResult, error) {
	streams := []supervisor.Stream{cmp.Or(supervisor.Stream(in.Stream), supervisor.Stdout)}
	if in.Stream == streamBoth {
		streams = []supervisor.Stream{supervisor.Stdout, supervisor.Stderr}
	}
	wait, err := supervisor.ParseSeconds("wait", in.Wait, 0, supervisor.MaxOutputWait)
	if err != nil {
		return nil, JobOutputResult{}, toolError(err)
	}
	var filter *regexp.Regexp
	if in.Filter != "" {
		if filter, err = regexp.Compile(in.Filter); err != nil {
			return nil, JobOutputResult{}, toolError(errorf(ErrInvalidArgument, "filter is not a valid regular expression (RE2): %v", err))
		}
	}
	after := supervisor.CursorNext
	if in.After != nil {
		if after = *in.After; after < 0 {
			return nil, JobOutputResult{}, toolError(errorf(ErrInvalidArgument,
				"after must be a byte offset of 0 or more (omit it to continue from the previous read), got %d", after))
		}
		if len(streams) > 1 {
			return nil, JobOutputResult{}, toolError(errorf(ErrInvalidArgument, "after names an offset in one stream; with stream: both omit it"))
		}
	}
	if err := s.ownJob(s.mcpOwner(req), in.ID); err != nil {
		return nil, JobOutputResult{}, toolError(err)
	}
	var res JobOutputResult
	var text strings.Builder
	for i, stream := range streams {
		out, err := s.sup.Jobs().Output(ctx, in.ID, stream, after, wait)
		if err != nil {
			return nil, JobOutputResult{}, toolError(err)
		}
		wait = 0 // the second stream is read at once
		if filter != nil {
			out.Data, res.DroppedLines = filterLines(out.Data, filter, res.DroppedLines)
		}
		if i == 0 {
			res.JobOutput = out
		} else {
			res.Stderr = &out
			text.WriteString("\n[stderr]\n")
		}
		text.WriteString(outputText(out, in.After == nil))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}}, res, nil
}

// streamBoth is the job_output stream that reads stdout, then stderr.
const streamBoth = "both"

// JobOutputResult is the structured result of job_output: the read of its
// stream (stdout for both), the stderr read of stream: both, and how many
// lines a filter dropped.
type JobOutputResult struct {
	supervisor.JobOutput
	Stderr       *supervisor.JobOutput `json:"stderr,omitempty"`
	DroppedLines int                   `json:"droppedLines,omitempty"`
}

// filterLines keeps the lines of data that re matches, adding the others
// to dropped.
func filterLines(data string, re *regexp.Regexp, dropped int) (string, int) {
	var b strings.Builder
	for line := range strings.Lines(data) {
		if re.MatchString(strings.TrimSuffix(line, "\n")) {
			b.WriteString(line)
		} else {
			dropped++
		}
	}
	return b.String(), dropped
}

// JobWaitInput is the arguments of the MCP tool job_wait.
type JobWaitInput struct {
	ID      string  `json:"id" jsonschema:"the job ID"`
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds to wait for the end (default 30)"`
}

// jobWaitDescription describes job_wait with its bounds.
func jobWaitDescription(b supervisor.Bounds) string {
	return fmt.Sprintf(`Wait for a background job to end and return its result like bash does (the output views of the whole run, with markers and spill files). timeout is in seconds: %g by default, at most %g; a job still running then returns running: true with its job ID, and you can wait again. A job that already ended returns its result at once.`,
		DefaultWaitTimeout.Seconds(), b.MaxTimeout.Seconds())
}

func (s *Server) jobWaitTool(ctx context.Context, req *mcp.CallToolRequest, in JobWaitInput) (*mcp.CallToolResult, supervisor.Result, error) {
	timeout := DefaultWaitTimeout
	if in.Timeout != 0 {
		var err error
		if timeout, err = supervisor.ParseSeconds("timeout", in.Timeout, 0, s.sup.Bounds().MaxTimeout); err != nil {
			return nil, supervisor.Result{}, toolError(err)
		}
	}
	if err := s.ownJob(s.mcpOwner(req), in.ID); err != nil {
		return nil, supervisor.Result{}, toolError(err)
	}
	res, err := s.sup.Jobs().Wait(ctx, in.ID, timeout)
	if errors.Is(err, supervisor.ErrStillRunning) {
		res = supervisor.Result{Running: true, JobID: in.ID, DurationMs: timeout.Milliseconds()}
		text := fmt.Sprintf("[job %s still running after waiting %s: wait again with job_wait, read what it printed with job_output, or stop it with job_kill]",
			in.ID, timeout)
		if info, err := s.sup.Jobs().Get(in.ID); err == nil && info.Waiting != nil {
			// It will not end by itself: it waits for its input.
			res.Waiting = info.Waiting
			text = fmt.Sprintf("[job %s still running after waiting %s, %s: answer with job_input, read what it printed with job_output, or stop it with job_kill]",
				in.ID, timeout, info.Waiting.Describe())
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
	}
	if err != nil {
		return nil, supervisor.Result{}, toolError(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text()}}}, res, nil
}

// outputText is a job read as the model sees it: the data, then a status
// line; a cursor read also names the offset to continue from.
func outputText(out supervisor.JobOutput, cursorless bool) string {
	var b strings.Builder
	if out.SkippedBytes > 0 {
		fmt.Fprintf(&b, "[skipped %d bytes: the reader fell behind what the server still holds]\n", out.SkippedBytes)
	}
	if out.Screen != nil {
		// A full-screen program: what it drew, not the escape sequences
		// that drew it (the structured result's data keeps them).
		b.WriteString(screenText(*out.Screen, "the bytes that drew it are the structured result's data"))
		b.WriteByte('\n')
	} else {
		b.WriteString(out.Data)
		if out.Data != "" && !strings.HasSuffix(out.Data, "\n") {
			b.WriteByte('\n')
		}
	}
	next := fmt.Sprintf(": continue with after=%d", out.Next)
	if cursorless {
		next = ""
	}
	switch {
	case out.State == supervisor.JobRunning && out.Waiting != nil:
		fmt.Fprintf(&b, "[job %s running, %s; %s read up to byte %d%s]", out.ID, out.Waiting.Describe(), out.Stream, out.Next, next)
	case out.State == supervisor.JobRunning:
		fmt.Fprintf(&b, "[job %s running; %s read up to byte %d%s]", out.ID, out.Stream, out.Next, next)
	case out.Data != "" || out.SkippedBytes > 0:
		fmt.Fprintf(&b, "[job %s exited (%s); %s read up to byte %d%s until a read returns nothing]",
			out.ID, strings.Trim(out.Result.Status(), "[]"), out.Stream, out.Next, next)
	default:
		fmt.Fprintf(&b, "[job %s exited (%s); end of %s at byte %d]", out.ID, strings.Trim(out.Result.Status(), "[]"), out.Stream, out.Next)
	}
	return b.String()
}

func (s *Server) jobInputTool(ctx context.Context, req *mcp.CallToolRequest, in JobInputInput) (*mcp.CallToolResult, JobInputResult, error) {
	if err := s.ownJob(s.mcpOwner(req), in.ID); err != nil {
		return nil, JobInputResult{}, toolError(err)
	}
	if in.Chars != "" {
		if in.Data != "" {
			return nil, JobInputResult{}, toolError(errorf(ErrInvalidArgument, "give data or chars, not both"))
		}
		in.Data = in.Chars
	}
	res := JobInputResult{ID: in.ID, Written: len(in.Data), Closed: in.Close}
	if in.Yield != 0 {
		yield, err := supervisor.ParseSeconds("yield", in.Yield, 0, supervisor.MaxOutputWait)
		if err != nil {
			return nil, JobInputResult{}, toolError(err)
		}
		out, err := s.sup.Jobs().Exchange(ctx, in.ID, supervisor.Stdout, []byte(in.Data), in.Close, yield)
		if err != nil {
			return nil, JobInputResult{}, toolError(err)
		}
		res.Output = &out
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: outputText(out, true)}}}, res, nil
	}
	if err := s.sup.Jobs().Input(in.ID, []byte(in.Data), in.Close); err != nil {
		return nil, JobInputResult{}, toolError(err)
	}
	text := fmt.Sprintf("wrote %d bytes to the stdin of job %s", res.Written, in.ID)
	if in.Close {
		text += "; stdin closed"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
}

func (s *Server) jobKillTool(ctx context.Context, req *mcp.CallToolRequest, in JobIDInput) (*mcp.CallToolResult, supervisor.Result, error) {
	if err := s.ownJob(s.mcpOwner(req), in.ID); err != nil {
		return nil, supervisor.Result{}, toolError(err)
	}
	res, err := s.sup.Jobs().Kill(in.ID)
	if err != nil {
		return nil, supervisor.Result{}, toolError(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text()}}}, res, nil
}

var jobScreenDescription = `Show the screen of a job run with tty: true as a person would see it now: its rows of text, where the cursor is (0-based row and column), whether a full-screen program (vi, less, top) has the alternate screen, and the window title. After the job exited, the screen it left.`

func (s *Server) jobScreenTool(ctx context.Context, req *mcp.CallToolRequest, in JobIDInput) (*mcp.CallToolResult, supervisor.Screen, error) {
	if err := s.ownJob(s.mcpOwner(req), in.ID); err != nil {
		return nil, supervisor.Screen{}, toolError(err)
	}
	sc, err := s.sup.Jobs().Screen(in.ID)
	if err != nil {
		return nil, supervisor.Screen{}, toolError(err)
	}
	text := screenText(sc, "")
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, sc, nil
}

// screenText is a screen as the model reads it: a header line (its size,
// the cursor, the alternate screen, the title, and note), then its rows.
func screenText(sc supervisor.Screen, note string) string {
	text := fmt.Sprintf("[screen %dx%d, cursor at row %d col %d%s%s%s]\n", sc.Cols, sc.Rows, sc.Cursor.Row, sc.Cursor.Col,
		map[bool]string{true: ", alternate screen", false: ""}[sc.AltScreen],
		map[bool]string{true: ", title " + fmt.Sprintf("%q", sc.Title), false: ""}[sc.Title != ""],
		map[bool]string{true: "; " + note, false: ""}[note != ""])
	return text + strings.Join(sc.Lines, "\n")
}

func (s *Server) jobListTool(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, JobList, error) {
	list := JobList{Jobs: s.ownedJobs(s.mcpOwner(req))}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: jsonText(list)}}}, list, nil
}
