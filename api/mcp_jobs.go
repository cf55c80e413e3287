package api

import (
	"context"
	"fmt"
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
)

// JobOutputInput is the arguments of the MCP tool job_output.
type JobOutputInput struct {
	ID     string  `json:"id" jsonschema:"the job ID returned by bash with background: true"`
	Stream string  `json:"stream,omitempty" jsonschema:"stdout (default) or stderr"`
	After  *int64  `json:"after,omitempty" jsonschema:"byte offset to read from; omit it to get what came since your previous read"`
	Wait   float64 `json:"wait,omitempty" jsonschema:"seconds to wait for new output or the end when there is none yet: 0 (default) to 30"`
}

// JobInputInput is the arguments of the MCP tool job_input.
type JobInputInput struct {
	ID    string `json:"id" jsonschema:"the ID of a job started with interactive: true"`
	Data  string `json:"data,omitempty" jsonschema:"text to write to the job's stdin (include the newline a line needs)"`
	Close bool   `json:"close,omitempty" jsonschema:"close stdin after writing (end of input)"`
	// Yield, when set, waits for the answer and returns it (stdout).
	Yield float64 `json:"yield,omitempty" jsonschema:"seconds to wait for the job's answer on stdout (returned early once it pauses for 100 ms), 0 to 30; 0 or absent returns at once"`
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

// backgroundDescription ends the bash tool's description.
func backgroundDescription(b supervisor.Bounds) string {
	return fmt.Sprintf(`Background jobs: a dev server, a watcher or a long build must be started with background: true (a plain command's leftover processes are killed when its shell exits). bash then returns at once with the job ID and PID; read the output with job_output, write stdin with job_input (only for interactive: true; otherwise stdin is empty), list jobs with job_list, stop one with job_kill. lifetime is in seconds: %s by default, %g s to %s allowed. %s`,
		minutes(supervisor.DefaultJobLifetime), supervisor.MinTimeout.Seconds(), hours(b.MaxJobLifetime), jobLimitsText(b))
}

// jobOutputDescription describes job_output with its windows.
func jobOutputDescription(b supervisor.Bounds) string {
	return fmt.Sprintf(`Read a background job's output (stdout by default, or stderr), and say whether the job is still running. %s

The text result is the output, then one status line; once the job has exited it carries the exit status, and a read that returns nothing after that is the end. An exited job stays readable for a while (see bash), then answers NOT_FOUND saying it expired.`, jobWindowText(b))
}

var jobInputDescription = fmt.Sprintf(`Write data to the stdin of a background job started with interactive: true, and close stdin with close: true (the end of input; cat and read then see EOF). Writing to a job that is not interactive, whose stdin was closed, or that has exited is refused with INVALID_ARGUMENT. With yield: N it waits up to N seconds for the answer on stdout and returns it (what a job_output read would), so one call is one turn of an interactive program; without yield, read the answer with job_output.`)

var jobKillDescription = `Kill a background job with its whole process tree (SIGTERM, a short grace, then SIGKILL) and return its result like bash does. Killing a job that already exited returns its result.`

var jobListDescription = `List the background jobs, running and recently exited: id, command, state (running or exited), pid, startedAt, and the bytes written so far to stdout and stderr.`

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
	addTool(s, srv, &mcp.Tool{Name: ToolJobOutput, Description: jobOutputDescription(b),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.jobOutputTool)
	addTool(s, srv, &mcp.Tool{Name: ToolJobInput, Description: jobInputDescription}, s.jobInputTool)
	addTool(s, srv, &mcp.Tool{Name: ToolJobKill, Description: jobKillDescription}, s.jobKillTool)
	addTool(s, srv, &mcp.Tool{Name: ToolJobList, Description: jobListDescription,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.jobListTool)
}

// bashBackground starts the bash tool's command as a background job.
func (s *Server) bashBackground(in BashInput) (*mcp.CallToolResult, any, error) {
	if !in.Background {
		return nil, nil, toolError(errorf(ErrInvalidArgument, "lifetime and interactive need background: true"))
	}
	req, err := JobRequest{ExecRequest: ExecRequest{Command: in.Command, Timeout: in.Timeout, Cwd: in.Cwd, Limits: in.Limits},
		Lifetime: in.Lifetime, Interactive: in.Interactive}.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		return nil, nil, toolError(err)
	}
	st, err := s.startJob(req)
	if err != nil {
		return nil, nil, toolError(err)
	}
	text := fmt.Sprintf("Started background job %s (pid %d). Read its output with job_output {\"id\": %q} "+
		"(add \"wait\": up to 30 seconds to wait for output); each read returns what came since the previous one.", st.ID, st.Pid, st.ID)
	if in.Interactive {
		text += fmt.Sprintf(" Its stdin is open: write to it with job_input {\"id\": %q, \"data\": \"...\\n\"}, close it with \"close\": true.", st.ID)
	}
	text += " Stop it with job_kill."
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, st, nil
}

func (s *Server) jobOutputTool(ctx context.Context, req *mcp.CallToolRequest, in JobOutputInput) (*mcp.CallToolResult, supervisor.JobOutput, error) {
	stream := in.Stream
	if stream == "" {
		stream = supervisor.Stdout
	}
	wait, err := seconds(in.Wait, "wait", 0, supervisor.MaxOutputWait)
	if err != nil {
		return nil, supervisor.JobOutput{}, toolError(err)
	}
	after := supervisor.CursorNext
	if in.After != nil {
		if after = *in.After; after < 0 {
			return nil, supervisor.JobOutput{}, toolError(errorf(ErrInvalidArgument,
				"after must be a byte offset of 0 or more (omit it to continue from the previous read), got %d", after))
		}
	}
	out, err := s.sup.Jobs().Output(ctx, in.ID, stream, after, wait)
	if err != nil {
		return nil, supervisor.JobOutput{}, toolError(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: outputText(out, in.After == nil)}}}, out, nil
}

// outputText is a job read as the model sees it: the data, then a status
// line; a cursor read also names the offset to continue from.
func outputText(out supervisor.JobOutput, cursorless bool) string {
	var b strings.Builder
	if out.SkippedBytes > 0 {
		fmt.Fprintf(&b, "[skipped %d bytes: the reader fell behind what the server still holds]\n", out.SkippedBytes)
	}
	b.WriteString(out.Data)
	if out.Data != "" && !strings.HasSuffix(out.Data, "\n") {
		b.WriteByte('\n')
	}
	next := fmt.Sprintf(": continue with after=%d", out.Next)
	if cursorless {
		next = ""
	}
	switch {
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
	res := JobInputResult{ID: in.ID, Written: len(in.Data), Closed: in.Close}
	if in.Yield != 0 {
		yield, err := seconds(in.Yield, "yield", 0, supervisor.MaxOutputWait)
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
	res, err := s.sup.Jobs().Kill(in.ID)
	if err != nil {
		return nil, supervisor.Result{}, toolError(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text()}}}, res, nil
}

func (s *Server) jobListTool(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, JobList, error) {
	list := JobList{Jobs: s.sup.Jobs().List()}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: jsonText(list)}}}, list, nil
}

// seconds converts a wire duration that must lie in [lo, hi].
func seconds(f float64, name string, lo, hi time.Duration) (time.Duration, error) {
	if f < lo.Seconds() || f > hi.Seconds() || f != f {
		return 0, errorf(ErrInvalidArgument, "%s must be between %g and %g seconds, got %v",
			name, lo.Seconds(), hi.Seconds(), f)
	}
	return time.Duration(f * float64(time.Second)), nil
}
