package api

import (
	"cmp"
	"context"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/supervisor"
)

// mcpFace is the transport an MCP server serves, which decides what its
// descriptions may promise: state carries across calls only with an MCP
// session, and only a process that serves HTTP may point to its routes.
type mcpFace uint8

const (
	faceStdio       mcpFace = iota // corral mcp: one session, no HTTP routes
	faceHTTP                       // /mcp with an Mcp-Session-Id
	faceSessionless                // /mcp without one (2026-07-28, a plain POST)
)

// bashOutputSchema is the output schema of bash: the Result's, plus the
// pid of a background job's JobStarted ({"id", "pid"}), nothing required,
// so that both validate.
func bashOutputSchema() *jsonschema.Schema {
	sch, err := jsonschema.For[supervisor.Result](nil)
	if err != nil {
		panic(err) // Result is fixed: a test fails first
	}
	sch.Properties["pid"] = &jsonschema.Schema{Type: "integer", Description: "a background job's process ID"}
	sch.Properties["id"].Description = "a background job's ID (j-…), or the journal ID (r-…) of a Result"
	sch.Required = nil
	return sch
}

// bashInteractive runs an interactive command with a yield: it starts as a
// job whose stdin stays open, and the call returns its Result when it ends
// within the yield, else, as soon as it waits for input or at the yield, a
// running Result with its job ID, its wait and what it printed so far
// (Jobs.Yield), so job_input can answer it.
func (s *Server) bashInteractive(ctx context.Context, req *mcp.CallToolRequest, in BashInput, owner string) (*mcp.CallToolResult, any, error) {
	yield, err := supervisor.ParseSeconds("yield", *in.Yield, 0, s.sup.Bounds().MaxTimeout)
	if err != nil || yield == 0 {
		return nil, nil, toolError(cmp.Or(err, errorf(ErrInvalidArgument, "interactive without background needs a yield above 0 seconds")))
	}
	if in.Stdin != "" {
		return nil, nil, toolError(errorf(ErrInvalidArgument, "an interactive command takes its stdin through job_input, not stdin"))
	}
	in.Yield = nil
	e, err := in.exec()
	if err != nil {
		return nil, nil, toolError(err)
	}
	jr, err := JobRequest{ExecRequest: e, Interactive: true}.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		return nil, nil, toolError(err)
	}
	jr.Owner = owner
	st, err := s.startJob(FaceMCP, jr)
	if err != nil {
		return nil, nil, toolError(err)
	}
	res, err := s.sup.Jobs().Yield(ctx, st.ID, yield)
	if err != nil {
		return nil, nil, toolError(err)
	}
	if !res.Running {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text()}}}, res, nil
	}
	text := res.Text() + fmt.Sprintf("\n[its stdin is open: answer with job_input {\"id\": %q, \"data\": \"...\\n\"}]", st.ID)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
}
