package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/supervisor"
)

// Defaults of the MCP sessions over streamable HTTP.
const (
	// DefaultMCPSessions bounds the MCP sessions open at once.
	DefaultMCPSessions = 256
	// DefaultMCPSessionIdle closes a session that received no request for
	// this long.
	DefaultMCPSessionIdle = 30 * time.Minute
)

// The MCP protocol header and session header of streamable HTTP, and the
// first protocol version in which one POST is a whole request (SEP-2575),
// which the go-sdk serves only without sessions.
const (
	mcpProtocolHeader = "Mcp-Protocol-Version"
	mcpSessionHeader  = "Mcp-Session-Id"
	mcpSessionless    = "2026-07-28"
)

// postHeader carries, from mcpFront to the tool handlers, the key under
// which the POST that carried a call is registered. Whatever a client puts
// in it is overwritten.
const postHeader = "X-Corral-Mcp-Post"

// mcpFront is the /mcp endpoint. It sends each request to one of two go-sdk
// handlers:
//
//   - stateful, with sessions (Mcp-Session-Id): an initialize, and every
//     request that names a session. The go-sdk cancels a call when its
//     session receives notifications/cancelled, which a stateless server
//     cannot do on protocols before 2026-07-28 (the cancel arrives in
//     another POST, in another throwaway session). Sessions are bounded in
//     number (a new one past the bound gets 429) and closed after an idle
//     time.
//   - stateless: requests on protocol 2026-07-28 and later (one POST is the
//     whole request; the go-sdk serves it only statelessly), and a POST
//     that names no session and is not an initialize (a one-shot call, as
//     from curl).
//
// Either way the POST that carried a call is registered for its duration,
// so that a client that disconnects aborts its command (see callContext):
// without an event store nobody can resume the response, and a client that
// is gone cannot read a graceful ending.
type mcpFront struct {
	stateful  http.Handler
	stateless http.Handler
	sessions  *mcp.Server // the stateful handler's server: its sessions are the live ones
	max       int

	opening atomic.Int64 // initializes in flight, counted against max
	seq     atomic.Uint64
	mu      sync.Mutex
	posts   map[string]context.Context // guarded by mu; by postHeader value
}

func (f *mcpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strconv.FormatUint(f.seq.Add(1), 36)
	r.Header.Set(postHeader, key)
	f.mu.Lock()
	f.posts[key] = r.Context()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.posts, key)
		f.mu.Unlock()
	}()

	if r.Header.Get(mcpProtocolHeader) >= mcpSessionless ||
		r.Method == http.MethodPost && r.Header.Get(mcpSessionHeader) == "" && !f.isInitialize(r) {
		f.stateless.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodPost && r.Header.Get(mcpSessionHeader) == "" {
		defer f.opening.Add(-1)
		if n := f.opening.Add(1) + int64(f.open()); n > int64(f.max) {
			w.Header().Set("Retry-After", "60")
			writeError(w, fmt.Errorf("%w: %d MCP sessions are open, the most this server allows; end one (DELETE /mcp with its Mcp-Session-Id) or retry later",
				ErrBusy, f.max))
			return
		}
	}
	f.stateful.ServeHTTP(w, r)
}

// newMCPFront makes the /mcp endpoint over two go-sdk handlers.
func (s *Server) newMCPFront(max int, idle time.Duration) *mcpFront {
	f := &mcpFront{sessions: s.newMCPServer(faceHTTP), max: max, posts: map[string]context.Context{}}
	sessionless := s.newMCPServer(faceSessionless)
	f.stateful = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.sessions },
		&mcp.StreamableHTTPOptions{SessionTimeout: idle, MaxRequestBodyBytes: MaxBodyBytes})
	f.stateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sessionless },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, MaxRequestBodyBytes: MaxBodyBytes})
	return f
}

// open counts the open sessions.
func (f *mcpFront) open() int {
	n := 0
	for range f.sessions.Sessions() {
		n++
	}
	return n
}

// isInitialize reports whether r's body is an initialize request (or a batch
// holding one), leaving the body readable again. A body it cannot read or
// parse is left to the go-sdk to refuse.
func (f *mcpFront) isInitialize(r *http.Request) bool {
	if r.Body == nil {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil {
		return false
	}
	type message struct {
		Method string `json:"method"`
	}
	var msgs []message
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		if json.Unmarshal(body, &msgs) != nil {
			return false
		}
	} else {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return false
		}
		msgs = []message{m}
	}
	for _, m := range msgs {
		if m.Method == "initialize" {
			return true
		}
	}
	return false
}

// post returns the context of the HTTP request that carried a tool call,
// nil when the call did not come over HTTP.
func (f *mcpFront) post(h http.Header) context.Context {
	if f == nil || h == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts[h.Get(postHeader)]
}

// closeSessions ends every open MCP session.
func (f *mcpFront) closeSessions() {
	for ss := range f.sessions.Sessions() {
		ss.Close()
	}
}

// callContext returns the context a tool call's command runs under. It ends
// with ctx (the go-sdk's: notifications/cancelled, the session's end), keeping
// its cause, and, when the call came over HTTP, with the POST that carried
// it: a client that disconnected gets supervisor.ErrClientGone, so the tree
// gets SIGKILL at once. end releases both; call it when the command returned.
func (s *Server) callContext(ctx context.Context, req *mcp.CallToolRequest) (_ context.Context, end func()) {
	var post context.Context
	if req.Extra != nil {
		post = s.front.post(req.Extra.Header)
	}
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopCall := context.AfterFunc(ctx, func() {
		// On 2026-07-28 the go-sdk ends ctx because the POST ended.
		if post != nil && post.Err() != nil {
			cancel(supervisor.ErrClientGone)
			return
		}
		cancel(context.Cause(ctx))
	})
	stopPost := func() bool { return false }
	if post != nil {
		stopPost = context.AfterFunc(post, func() { cancel(supervisor.ErrClientGone) })
	}
	return cctx, func() {
		stopCall()
		stopPost()
		cancel(nil)
	}
}
