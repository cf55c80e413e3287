package api

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logRequests logs one line per request at info level: method, path,
// status, bytes written, duration and remote address.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		begin := time.Now()
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		s.log.Info().
			Str("method", r.Method).
			Str("path", r.URL.Path).
			Int("status", status).
			Int64("bytes", rec.bytes).
			Dur("duration", time.Since(begin)).
			Str("remote", r.RemoteAddr).
			Msg("request")
	})
}

// recorder remembers the status and counts the bytes of a response. Unwrap
// lets http.ResponseController reach the connection (Flush, deadlines).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher for handlers that check for it directly
// (the MCP handler's event stream does).
func (r *recorder) Flush() {
	http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logToolCalls logs one line per MCP tool call at info level: the tool's
// name, whether it failed, and its duration. The HTTP request line names
// only the /mcp endpoint, and stdio has none; the arguments (a command, its
// environment) are never logged.
func (s *Server) logToolCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		begin := time.Now()
		res, err := next(ctx, method, req)
		failed := err != nil
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			failed = true
		}
		s.log.Info().
			Str("tool", call.Params.Name).
			Bool("error", failed).
			Dur("duration", time.Since(begin)).
			Msg("mcp tool call")
		return res, err
	}
}
