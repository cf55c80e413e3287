package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/supervisor"
)

// Tenancy: a background job, its output, its stdin and its kill belong to
// the client that started it (docs/mcp.md, Tenancy). The owner is
//
//   - over MCP with a session (a streamable-HTTP Mcp-Session-Id, or the one
//     connection of corral mcp): that MCP session;
//   - over HTTP, and over MCP without a session: the bearer token the
//     request carried ("token:N", N its index in Config.Tokens, 0 for
//     Config.Token), or "http" on a server without tokens.
//
// Another owner's job answers NOT_FOUND with the message an unknown job
// gets, so a client cannot learn that it exists. Config.SharedJobs turns
// this off: every client sees every job, as before.

// tenantKey is the context key under which auth records the token's owner.
type tenantKey struct{}

// ownerHTTP is the owner of the jobs of a server without tokens.
const ownerHTTP = "http"

// withTenant records the owner of the token at index i in r's context.
func withTenant(r *http.Request, i int) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), tenantKey{}, "token:"+strconv.Itoa(i)))
}

// tenantOf is the owner of a request's token, from its context.
func tenantOf(ctx context.Context) string {
	if ctx == nil {
		return ownerHTTP
	}
	if t, ok := ctx.Value(tenantKey{}).(string); ok {
		return t
	}
	return ownerHTTP
}

// httpOwner is the owner of the jobs an HTTP request starts and sees.
func (s *Server) httpOwner(r *http.Request) string {
	if s.sharedJobs {
		return ""
	}
	return tenantOf(r.Context())
}

// mcpOwner is the owner of the jobs an MCP tool call starts and sees: its
// MCP session, or, for a call without one, the token of the POST that
// carried it.
func (s *Server) mcpOwner(req *mcp.CallToolRequest) string {
	switch {
	case s.sharedJobs:
		return ""
	case req != nil && req.Session != nil && req.Session.ID() != "":
		return "mcp:" + req.Session.ID()
	case req != nil && req.Extra != nil:
		if post := s.front.post(req.Extra.Header); post != nil {
			return tenantOf(post)
		}
	}
	return "mcp:" + s.stdioSession
}

// ownJob returns nil when owner may use job id, else the error an unknown
// job gets (ErrNotFound); an unknown or forgotten job gets its own error.
func (s *Server) ownJob(owner, id string) error {
	o, err := s.sup.Jobs().Owner(id)
	if err != nil {
		return err
	}
	if o != owner {
		return notYours(id)
	}
	return nil
}

// notYours is the error another owner's job gets: the one an unknown job
// gets from the supervisor.
func notYours(id string) error {
	return &supervisor.JobError{Kind: supervisor.ErrNotFound, Reason: "no job " + strconv.Quote(id)}
}

// ownedJobs lists the jobs owner may see.
func (s *Server) ownedJobs(owner string) []supervisor.JobInfo {
	if s.sharedJobs {
		return s.sup.Jobs().List()
	}
	return s.sup.Jobs().Owned(owner)
}
