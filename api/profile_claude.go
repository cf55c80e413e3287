package api

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/supervisor"
)

// The claude-code profile serves Claude Code's own shell tools, Bash,
// BashOutput and KillShell, with their argument schemas, descriptions and
// result texts as Claude Code ships them (docs/profiles.md), over corral:
// bounds, markers, spill files, tree kill, journal, sessions and tenancy
// are corral's.
//
// Source: the npm package @anthropic-ai/claude-agent-sdk 0.1.26 (synced in
// github.com/Cometix-Org/Claude-Code-Agent-SDK-Typescript-Tracker at commit
// 51565b39db3b867d0ab21106263cc1d840546087): sdk-tools.d.ts (BashInput,
// BashOutputInput, KillShellInput) for the schemas; cli.js for the tool
// prompts (the Bash prompt function, R_2 for BashOutput, w_2 for KillShell),
// the result texts (mapToolResultToToolResultBlockParam of each) and the
// defaults (timeout 120000 ms, at most 600000 ms; the filter regex is
// case-insensitive). api/testdata/profiles/claude-code holds the expected
// tool list and says what differs.

// Claude Code's tool names.
const (
	ToolClaudeBash       = "Bash"
	ToolClaudeBashOutput = "BashOutput"
	ToolClaudeKillShell  = "KillShell"
)

// Claude Code's timeouts, in milliseconds.
const (
	claudeDefaultTimeoutMs = 120000
	claudeMaxTimeoutMs     = 600000
)

var (
	//go:embed profiles/claude-code/Bash.txt
	claudeBashPrompt string
	//go:embed profiles/claude-code/BashOutput.txt
	claudeBashOutputPrompt string
	//go:embed profiles/claude-code/KillShell.txt
	claudeKillShellPrompt string
)

// ClaudeBashInput is the arguments of Claude Code's Bash.
type ClaudeBashInput struct {
	Command         string   `json:"command"`
	Timeout         *float64 `json:"timeout,omitempty"` // milliseconds
	Description     string   `json:"description,omitempty"`
	RunInBackground bool     `json:"run_in_background,omitempty"`
	// DangerouslyDisableSandbox is accepted and changes nothing: corral
	// has no sandbox mode to leave, and its containment always applies.
	DangerouslyDisableSandbox bool `json:"dangerouslyDisableSandbox,omitempty"`
}

// ClaudeBashOutputInput is the arguments of Claude Code's BashOutput.
type ClaudeBashOutputInput struct {
	BashID string `json:"bash_id"`
	Filter string `json:"filter,omitempty"`
}

// ClaudeKillShellInput is the arguments of Claude Code's KillShell.
type ClaudeKillShellInput struct {
	ShellID string `json:"shell_id"`
}

// claudeSchema is an object schema of string-keyed properties, as Claude
// Code's zod schemas give them (strict objects: no other keys).
func claudeSchema(required []string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: props, Required: required,
		AdditionalProperties: falseSchema}
}

// falseSchema is the schema false, as zod's strict objects give
// additionalProperties.
var falseSchema = &jsonschema.Schema{Not: &jsonschema.Schema{}}

func prop(typ, desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: typ, Description: desc}
}

// newClaudeServer builds the MCP server of the claude-code profile.
func (s *Server) newClaudeServer(face mcpFace) *mcp.Server {
	// No server instructions: Claude Code's tools come with none, and the
	// corral tools' instructions name tools this profile does not serve.
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral", Title: "corral", Version: s.version},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}})
	maxMs := s.claudeMaxMs()
	if s.toolInputs == nil {
		s.toolInputs = map[string]reflect.Type{}
	}
	srv.AddReceivingMiddleware(s.logToolCalls, s.strictArguments)
	addTool(s, srv, &mcp.Tool{Name: ToolClaudeBash, Description: claudeBashDescription(maxMs, face),
		InputSchema: claudeSchema([]string{"command"}, map[string]*jsonschema.Schema{
			"command": prop("string", "The command to execute"),
			"timeout": prop("number", fmt.Sprintf("Optional timeout in milliseconds (max %d)", maxMs)),
			"description": prop("string", "Clear, concise description of what this command does in 5-10 words, in active voice. Examples:\n"+
				"Input: ls\nOutput: List files in current directory\n\nInput: git status\nOutput: Show working tree status\n\n"+
				"Input: npm install\nOutput: Install package dependencies\n\nInput: mkdir foo\nOutput: Create directory 'foo'"),
			"run_in_background":         prop("boolean", "Set to true to run this command in the background. Use BashOutput to read the output later."),
			"dangerouslyDisableSandbox": prop("boolean", "Set this to true to dangerously override sandbox mode and run commands without sandboxing."),
		})}, s.claudeBash)
	addTool(s, srv, &mcp.Tool{Name: ToolClaudeBashOutput, Description: claudeBashOutputPrompt,
		InputSchema: claudeSchema([]string{"bash_id"}, map[string]*jsonschema.Schema{
			"bash_id": prop("string", "The ID of the background shell to retrieve output from"),
			"filter": prop("string", "Optional regular expression to filter the output lines. Only lines matching this regex will be "+
				"included in the result. Any lines that do not match will no longer be available to read."),
		}), Annotations: readOnly()}, s.claudeBashOutput)
	addTool(s, srv, &mcp.Tool{Name: ToolClaudeKillShell, Description: claudeKillShellPrompt,
		InputSchema: claudeSchema([]string{"shell_id"}, map[string]*jsonschema.Schema{
			"shell_id": prop("string", "The ID of the background shell to kill"),
		}), Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}}, s.claudeKillShell)
	return srv
}

// claudeMaxMs is the largest Bash timeout in milliseconds: Claude Code's
// 600000, at most the server's maximum timeout (300 s by default). The
// description and the schema state it; a larger timeout is refused.
func (s *Server) claudeMaxMs() int64 {
	return min(claudeMaxTimeoutMs, s.sup.Bounds().MaxTimeout.Milliseconds())
}

// claudeBashDescription is Claude Code's Bash prompt with the largest
// timeout this server takes; on a face without MCP sessions, without the
// persistent session it cannot give.
func claudeBashDescription(maxMs int64, face mcpFace) string {
	d := strings.Replace(claudeBashPrompt, "(up to 600000ms / 10 minutes)",
		fmt.Sprintf("(up to %dms / %s)", maxMs, strings.TrimSuffix(minutes(time.Duration(maxMs)*time.Millisecond), " min")+" minutes"), 1)
	if face == faceSessionless {
		d = strings.Replace(d, "Executes a given bash command in a persistent shell session with optional timeout,",
			"Executes a given bash command with optional timeout (this connection has no MCP session: the working directory and environment do not carry from one command to the next),", 1)
	}
	return d
}

// claudeBash runs Bash: timeout in milliseconds (120000 by default, at most
// 600000 and the server's maximum); the text is Claude Code's (stdout,
// stderr, the background line) with corral's markers and its status line.
func (s *Server) claudeBash(ctx context.Context, req *mcp.CallToolRequest, in ClaudeBashInput) (*mcp.CallToolResult, any, error) {
	ms := float64(claudeDefaultTimeoutMs)
	if in.Timeout != nil {
		ms = *in.Timeout
	}
	// Refused, not clamped: a command cut short of the time asked for
	// would fail for no reason the model can see.
	if maxMs := s.claudeMaxMs(); !(ms > 0) || ms > float64(maxMs) {
		return nil, nil, toolError(errorf(ErrInvalidArgument, "timeout is in milliseconds, from 1 to %d on this server; got %v", maxMs, ms))
	}
	sec := math.Max(ms/1000, supervisor.MinTimeout.Seconds())
	owner := s.mcpOwner(req)
	if in.RunInBackground {
		e := ExecRequest{Command: in.Command}
		jr, err := JobRequest{ExecRequest: e, Lifetime: nil}.request(s.sup.Bounds().MaxTimeout)
		if err != nil {
			return nil, nil, toolError(err)
		}
		jr.Owner = owner
		st, err := s.startJob(FaceMCP, jr)
		if err != nil {
			return nil, nil, toolError(err)
		}
		return textResult("Command running in background with ID: " + st.ID), nil, nil
	}
	r, err := ExecRequest{Command: in.Command, Timeout: &sec, Session: s.mcpSession(req)}.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		s.metrics.outcome(FaceMCP, OutcomeInvalid)
		return nil, nil, toolError(err)
	}
	r.Owner = owner
	ctx, end := s.callContext(ctx, req)
	defer end()
	res, err := s.run(ctx, FaceMCP, r)
	if err != nil {
		return nil, nil, toolError(err)
	}
	// Claude Code: stdout without leading blank lines and trailing space,
	// stderr trimmed, each present only when non-empty.
	var parts []string
	if out := strings.TrimRight(strings.TrimLeft(res.Stdout, " \t\r\n"), " \t\r\n"); out != "" {
		parts = append(parts, out)
	}
	if e := strings.TrimSpace(res.Stderr); e != "" {
		parts = append(parts, e)
	}
	parts = append(parts, res.Status())
	r2 := textResult(strings.Join(parts, "\n"))
	r2.IsError = res.Aborted
	return r2, nil, nil
}

// claudeBashOutput is BashOutput: both streams' new output since the last
// read, filtered (case-insensitive, as Claude Code's RegExp(filter, "i")),
// in Claude Code's tags.
func (s *Server) claudeBashOutput(ctx context.Context, req *mcp.CallToolRequest, in ClaudeBashOutputInput) (*mcp.CallToolResult, any, error) {
	var re *regexp.Regexp
	if in.Filter != "" {
		var err error
		if re, err = regexp.Compile("(?i)" + in.Filter); err != nil {
			return nil, nil, toolError(errorf(ErrInvalidArgument, "Invalid regex pattern %q: %v", in.Filter, err))
		}
	}
	if err := s.ownJob(s.mcpOwner(req), in.BashID); err != nil {
		return nil, nil, toolError(claudeNoShell(err, in.BashID))
	}
	var data [2]string
	var last supervisor.JobOutput
	for i, stream := range []supervisor.Stream{supervisor.Stdout, supervisor.Stderr} {
		out, err := s.sup.Jobs().Output(ctx, in.BashID, stream, supervisor.CursorNext, 0)
		if err != nil {
			return nil, nil, toolError(claudeNoShell(err, in.BashID))
		}
		data[i], last = out.Data, out
		if re != nil {
			data[i], _ = filterLines(out.Data, re, 0)
		}
	}
	status, code := claudeStatus(last)
	parts := []string{"<status>" + status + "</status>"}
	if code != nil {
		parts = append(parts, fmt.Sprintf("<exit_code>%d</exit_code>", *code))
	}
	if strings.TrimSpace(data[0]) != "" {
		parts = append(parts, "<stdout>\n"+strings.TrimRight(data[0], " \t\r\n")+"\n</stdout>")
	}
	if strings.TrimSpace(data[1]) != "" {
		parts = append(parts, "<stderr>\n"+strings.TrimSpace(data[1])+"\n</stderr>")
	}
	parts = append(parts, "<timestamp>"+time.Now().UTC().Format("2006-01-02T15:04:05.000Z")+"</timestamp>")
	return textResult(strings.Join(parts, "\n\n")), nil, nil
}

// claudeStatus maps a job's state to Claude Code's shell status: running,
// completed (exit 0), failed (another exit code) or killed (a signal, a
// timeout, an abort), with the exit code when there is one.
func claudeStatus(out supervisor.JobOutput) (string, *int) {
	switch {
	case out.State == supervisor.JobRunning || out.Result == nil:
		return "running", nil
	case out.Result.ExitCode == nil:
		return "killed", nil
	case *out.Result.ExitCode == 0:
		return "completed", out.Result.ExitCode
	}
	return "failed", out.Result.ExitCode
}

// claudeKillShell is KillShell: the tree is killed as job_kill does; the
// text is Claude Code's JSON.
func (s *Server) claudeKillShell(ctx context.Context, req *mcp.CallToolRequest, in ClaudeKillShellInput) (*mcp.CallToolResult, any, error) {
	if err := s.ownJob(s.mcpOwner(req), in.ShellID); err != nil {
		return nil, nil, toolError(claudeNoShell(err, in.ShellID))
	}
	info, err := s.sup.Jobs().Get(in.ShellID)
	if err != nil {
		return nil, nil, toolError(claudeNoShell(err, in.ShellID))
	}
	if info.State != supervisor.JobRunning {
		res, _ := s.sup.Jobs().Wait(ctx, in.ShellID, time.Second)
		status, _ := claudeStatus(supervisor.JobOutput{State: info.State, Result: &res})
		return nil, nil, toolError(errorf(ErrInvalidArgument, "Shell %s is not running, so cannot be killed (status: %s)", in.ShellID, status))
	}
	if _, err := s.sup.Jobs().Kill(in.ShellID); err != nil {
		return nil, nil, toolError(claudeNoShell(err, in.ShellID))
	}
	// As JSON.stringify writes it: no HTML escaping.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(struct {
		Message string `json:"message"`
		ShellID string `json:"shell_id"`
	}{fmt.Sprintf("Successfully killed shell: %s (%s)", in.ShellID, info.Command), in.ShellID})
	return textResult(strings.TrimSuffix(b.String(), "\n")), nil, nil
}

// claudeNoShell words an unknown (or another client's) job as Claude Code
// does; other errors stay corral's.
func claudeNoShell(err error, id string) error {
	if errors.Is(err, supervisor.ErrNotFound) {
		return errorf(ErrNotFound, "No shell found with ID: %s", id)
	}
	return err
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
