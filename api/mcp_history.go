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

// historyDescription describes history on face: over HTTP it names the
// route of a full entry; corral mcp serves no HTTP, so there it names none.
func historyDescription(face mcpFace) string {
	d := fmt.Sprintf(`List the last results of this session (or the named one), oldest first: for each, a header line [seq] $ <first line of the command, at most %d characters> with its result id, then its status line (exit code or how it ended). At most %d results (default %d). The output itself is not repeated here`,
		maxHeaderCommand, MaxHistoryN, DefaultHistoryN)
	if face == faceStdio {
		return d + "."
	}
	return d + ": the full entry, stdout and stderr included, is GET /v1/sessions/<session>/results/<id> on this server's HTTP API."
}

func (s *Server) addHistoryTool(srv *mcp.Server, face mcpFace) {
	addTool(s, srv, &mcp.Tool{Name: ToolHistory, Title: "List this session's last results", Description: historyDescription(face),
		Annotations: readOnly()}, s.historyTool)
}

// HistoryResult is the structured result of history: the session, how many
// results its journal keeps, and the last ones, oldest first.
type HistoryResult struct {
	Session string         `json:"session"`
	Results int            `json:"results"`
	Entries []HistoryEntry `json:"entries"`
}

// HistoryEntry is one result as history shows it.
type HistoryEntry struct {
	Seq     uint64 `json:"seq"`
	ID      string `json:"id"`
	Command string `json:"command"` // its first line, at most 200 characters
	Status  string `json:"status"`  // the status line, or [running]
}

func (s *Server) historyTool(ctx context.Context, req *mcp.CallToolRequest, in HistoryInput) (*mcp.CallToolResult, HistoryResult, error) {
	n := in.Limit
	switch {
	case n == 0:
		n = DefaultHistoryN
	case n < 1 || n > MaxHistoryN:
		return nil, HistoryResult{}, toolError(errorf(ErrInvalidArgument, "limit must be from 1 to %d, got %d", MaxHistoryN, n))
	}
	session := in.Session
	if session == "" {
		session = s.mcpSession(req)
	}
	if session == "" {
		session = supervisor.StatelessSession
	}
	h, err := s.history(session, n)
	if err != nil {
		return nil, HistoryResult{}, toolError(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Session %s: %d results kept; the last %d:\n", session, h.Results, len(h.Entries))
	for _, e := range h.Entries {
		fmt.Fprintf(&b, "[%d] $ %s (%s)\n%s\n", e.Seq, e.Command, e.ID, e.Status)
	}
	// Only a server that serves HTTP names its route (corral mcp serves none).
	if req.Extra != nil && req.Extra.Header != nil {
		fmt.Fprintf(&b, "Full entry: GET /v1/sessions/%s/results/<id>.", session)
	}
	text := strings.TrimSuffix(b.String(), "\n")
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, h, nil
}

// history reads the last n entries of a session.
func (s *Server) history(session string, n int) (HistoryResult, error) {
	j, err := s.sessionJournal()
	if err != nil {
		return HistoryResult{}, err
	}
	info, err := j.Session(session)
	if err != nil {
		return HistoryResult{}, journalError(err, session)
	}
	after := uint64(0)
	if info.LastSeq > uint64(n) {
		after = info.LastSeq - uint64(n)
	}
	entries, _, err := j.List(session, after, n)
	if err != nil {
		return HistoryResult{}, journalError(err, session)
	}
	h := HistoryResult{Session: session, Results: info.Results, Entries: []HistoryEntry{}}
	for _, raw := range entries {
		var e journal.Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return HistoryResult{}, fmt.Errorf("api: history: %w", err)
		}
		he := HistoryEntry{Seq: e.Seq, ID: e.ID, Command: headerCommand(e.Command), Status: "[running]"}
		if string(e.Result) != "null" && len(e.Result) > 0 {
			var res supervisor.Result
			if err := json.Unmarshal(e.Result, &res); err != nil {
				return HistoryResult{}, fmt.Errorf("api: history: %w", err)
			}
			he.Status = res.Status()
		}
		h.Entries = append(h.Entries, he)
	}
	return h, nil
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
