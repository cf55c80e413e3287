package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeMCP serves MCPServer over one persistent connection (corral mcp
// passes a LineTransport over stdin and stdout) until the client hangs up or ctx is done,
// and returns once every tool call has returned. When ctx is done the Server
// is shut down first: the running commands are aborted and their trees
// killed. (On its own the SDK would wait for the calls in flight when ctx
// ends; a client that hangs up cancels its calls itself.)
//
// The connection is one MCP session, and so one corral session: the working
// directory and exported variables of one bash call carry to the next.
func (s *Server) ServeMCP(ctx context.Context, t mcp.Transport) error {
	var b [6]byte
	rand.Read(b[:])
	s.stdioSession = "mcp-stdio-" + hex.EncodeToString(b[:])
	stop := context.AfterFunc(ctx, s.abort)
	defer stop()
	return s.mcp.Run(ctx, t)
}

// abort refuses new commands and cancels the running ones without waiting.
func (s *Server) abort() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
}
