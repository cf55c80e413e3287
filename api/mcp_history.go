package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/supervisor"
)

// ToolHistory is the MCP tool that lists a session's last results.
const ToolHistory = "history"

// History tool bounds.
const (
	DefaultHistoryN = 10
	MaxHistoryN     = 50
	// maxHeaderCommand bounds the command shown in a header line.
	maxHeaderCommand = 200
)

// HistoryInput is the history tool's arguments.
type HistoryInput struct {
	Session string `json:"session,omitempty" jsonschema:"the corral session; default: this MCP session's"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many of the newest results, 1-50 (default 10)"`
}

var historyDescription = fmt.Sprintf(`List the last results of this session (or the named one), oldest first: for each, a header line [seq] $ <first line of the command, at most %d characters> with its result id, then its status line (exit code or how it ended). At most %d results (default %d). The output itself is not repeated here: the full entry, stdout and stderr included, is GET /v1/sessions/<session>/results/<id> on the HTTP API.`,
	maxHeaderCommand, MaxHistoryN, DefaultHistoryN)

func (s *Server) addHistoryTool(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{Name: ToolHistory, Description: historyDescription,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.historyTool)
}

func (s *Server) historyTool(ctx context.Context, req *mcp.CallToolRequest, in HistoryInput) (*mcp.CallToolResult, any, error) {
	n := in.Limit
	switch {
	case n == 0:
		n = DefaultHistoryN
	case n < 1 || n > MaxHistoryN:
		return nil, nil, toolError(errorf(ErrInvalidArgument, "limit must be from 1 to %d, got %d", MaxHistoryN, n))
	}
	session := in.Session
	if session == "" {
		session = s.mcpSession(req)
	}
	if session == "" {
		session = supervisor.StatelessSession
	}
	text, err := s.historyText(session, n)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

// historyText renders the last n entries of a session.
func (s *Server) historyText(session string, n int) (string, error) {
	j, err := s.sessionJournal()
	if err != nil {
		return "", err
	}
	info, err := j.Session(session)
	if err != nil {
		return "", journalError(err, session)
	}
	after := uint64(0)
	if info.LastSeq > uint64(n) {
		after = info.LastSeq - uint64(n)
	}
	entries, _, err := j.List(session, after, n)
	if err != nil {
		return "", journalError(err, session)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Session %s: %d results kept; the last %d:\n", session, info.Results, len(entries))
	for _, raw := range entries {
		var e journal.Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return "", fmt.Errorf("api: history: %w", err)
		}
		fmt.Fprintf(&b, "[%d] $ %s (%s)\n", e.Seq, headerCommand(e.Command), e.ID)
		if string(e.Result) == "null" || len(e.Result) == 0 {
			b.WriteString("[running]\n")
			continue
		}
		var res supervisor.Result
		if err := json.Unmarshal(e.Result, &res); err != nil {
			return "", fmt.Errorf("api: history: %w", err)
		}
		b.WriteString(res.Status() + "\n")
	}
	fmt.Fprintf(&b, "Full entry: GET /v1/sessions/%s/results/<id>.", session)
	return b.String(), nil
}

// headerCommand is the first line of a command, at most maxHeaderCommand
// characters (runes), with "…" when cut, and every character that could
// break or disguise the line shown as '?' (budget.Printable).
func headerCommand(cmd string) string {
	line, _, more := strings.Cut(cmd, "\n")
	line = budget.Printable(strings.TrimSuffix(line, "\r"))
	r := []rune(line)
	if len(r) > maxHeaderCommand {
		return string(r[:maxHeaderCommand]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}
