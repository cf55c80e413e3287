// Package api serves corral over the network: the HTTP exec server with
// NDJSON streaming, the MCP tools, authentication and metrics. It also owns
// the wire form of errors ({"error": {"code", "message"}}) that every
// interface, the CLI included, prints.
//
// A Server wraps one supervisor.Supervisor. Its Handler serves
//
//	POST   /v1/exec            run a command: 200 and the Result JSON, whatever its exit code;
//	                           with "Accept: application/x-ndjson" the live events, one flushed
//	                           line each, the result last
//	POST   /v1/read            a window of a spill file (budget.ReadResult)
//	POST   /v1/grep            matching lines of a spill file (budget.GrepResult)
//	DELETE /v1/sessions/{id}   remove a session's spill files (204)
//	GET    /healthz            status, version and containment tier; never needs the token
//	GET    /metrics            Prometheus text format, from the Server's own registry
//	/mcp                       MCP over streamable HTTP (stateless), the same tools as MCPServer
//
// and promises:
//
//   - Input: bodies are one JSON object of at most MaxBodyBytes (else 413);
//     unknown fields, wrong types, a timeout outside 1–300 s, an empty
//     command, a bad session or label are 400 INVALID_ARGUMENT and nothing
//     runs.
//   - Auth: with Config.Token, every request but /healthz needs
//     "Authorization: Bearer <token>", compared in constant time; else 401.
//   - Limits: at most Config.MaxConcurrent commands run at once over HTTP
//     and MCP together; one more is refused at once with 429
//     RESOURCE_EXHAUSTED.
//   - Lifetime: a command lives no longer than its request. A client that
//     goes away, stops reading a stream for 30 s or cancels an MCP call
//     aborts the command and its tree is killed; Shutdown aborts them all.
//   - Reading back: read and grep reach only regular files inside the data
//     directory after resolving symlinks (spill.Store.Resolve); anything else
//     is 404 NOT_FOUND, and binary content is 422 TOOL_BINARY_CONTENT.
//
// MCPServer has three tools: bash (live output as progress notifications,
// the Result as structured content), read_output and grep_output. Their
// descriptions state the limits verbatim, as the specification asks.
package api
