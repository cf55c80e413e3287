// Package api serves corral over the network: the HTTP exec server with
// NDJSON streaming, the MCP tools, authentication and metrics. It also owns
// the wire form of errors ({"error": {"code", "message"}}) that every
// interface, the CLI included, prints.
//
// A Server wraps one supervisor.Supervisor. Its Handler serves
//
//	POST   /v1/exec            run a command: 200 and the Result JSON, whatever its exit code;
//	                           with "Accept: application/x-ndjson" the live events, one flushed
//	                           line each, the result last; {"event":"keepalive"} after
//	                           Config.Heartbeat (15 s) without a line
//	POST   /v1/batch           run 1–32 commands, concurrency at a time (BatchBody): every
//	                           Result and the batch's bounded view (supervisor.BatchResult)
//	GET    /v1/sessions/{id}/batches/{bid}
//	                           a journaled batch, byte for byte the POST's answer
//	POST   /v1/jobs            start a background job (JobRequest): {"id", "pid"}
//	GET    /v1/jobs            list the jobs (JobList)
//	GET    /v1/jobs/{id}       the job's status, its Result once it exited (supervisor.JobStatus)
//	POST   /v1/jobs/{id}/resize  {"cols", "rows"}: resize a terminal job's terminal (204)
//	GET    /v1/jobs/{id}/screen  a terminal job's screen (supervisor.Screen)
//	GET    /v1/jobs/{id}/output?stream=stdout&after=0&wait=5
//	                           a cursor read (supervisor.JobOutput), long poll up to 30 s
//	POST   /v1/jobs/{id}/stdin[?close=true]  raw body to an interactive job's stdin (204)
//	POST   /v1/jobs/{id}/wait?timeout=10     the Result; 408 if still running at the deadline
//	DELETE /v1/jobs/{id}       kill the job's tree: the Result
//	POST   /v1/read            a window of a spill file (budget.ReadResult)
//	POST   /v1/grep            matching lines of a spill file (budget.GrepResult)
//	DELETE /v1/sessions/{id}   remove a session's spill files (204)
//	GET    /healthz            status, version and containment tier; never needs the token
//	GET    /metrics            Prometheus text format, from the Server's own registry
//	/mcp                       MCP over streamable HTTP, the same tools as MCPServer: sessions
//	                           from an initialize (bounded in number and idle time), stateless
//	                           for protocol 2026-07-28 and for POSTs that name no session
//
// and promises:
//
//   - Input: bodies are one JSON object of at most MaxBodyBytes (else 413
//     RESOURCE_EXHAUSTED), decoded strictly: an unknown key, a key that
//     matches a field only in another case, a duplicate key at any depth,
//     invalid UTF-8, a lone surrogate escape, a wrong type, a timeout
//     outside 1–300 s, an empty command, a bad session or label, or a
//     command and environment the kernel refuses to exec for their size
//     (E2BIG) are 400 INVALID_ARGUMENT naming the key or the byte, and
//     nothing runs. MCP tool arguments are checked the same way before the
//     SDK decodes them.
//   - Errors: every error response, ServeMux's 404 and 405 and the MCP
//     SDK's plain-text refusals included, is the error JSON; its message
//     carries no Go package prefix (Message). 429 carries Retry-After. The
//     browser guard refuses cross-origin and DNS-rebound requests with 403
//     PERMISSION_DENIED.
//   - Auth: with Config.Token, every request but /healthz needs
//     "Authorization: Bearer <token>" (the scheme in any case), compared in
//     constant time; else 401 with WWW-Authenticate, and the connection is
//     closed.
//   - Limits: at most Config.MaxConcurrent commands run at once over HTTP
//     and MCP together; one more is refused at once with 429
//     RESOURCE_EXHAUSTED. A batch holds min(concurrency, requests,
//     MaxConcurrent) of those slots while it runs, taken at once or
//     refused with 429 before anything starts. A request body has Config.BodyTimeout to arrive
//     (else 408); LimitListener caps the open connections (one more gets 503
//     UNAVAILABLE with Retry-After). After Shutdown, commands and jobs get
//     503 UNAVAILABLE.
//   - Lifetime: a command lives no longer than its request. A client that
//     goes away (an HTTP request or an MCP tools/call POST closed) or stops
//     reading a stream for 30 s aborts the command and its tree is
//     SIGKILLed at once (supervisor.ErrClientGone); an MCP
//     notifications/cancelled aborts it with SIGTERM and the grace first;
//     Shutdown aborts them all and ends the MCP sessions.
//     A background job lives until it exits, is killed, or reaches its
//     lifetime (30 min by default, 1 s–24 h); Shutdown kills every job.
//     Unknown job IDs are 404 NOT_FOUND, and so are forgotten ones (their
//     message says the job expired); at most 32 jobs run at once (429).
//     A wait that reaches its deadline is 408 DEADLINE_EXCEEDED. After
//     Shutdown, new commands and jobs are 503 UNAVAILABLE.
//   - Reading back: read and grep reach only regular files under
//     <dataDir>/scratch, opened beneath the data directory held open since
//     start without following any symlink and without blocking on a FIFO
//     (spill.Store.Open); anything else is 404 NOT_FOUND with the reason,
//     and binary content is 400 TOOL_BINARY_CONTENT. A spill that holds
//     less than its stream adds "partial": true and a notice saying how
//     much of the stream it holds.
//   - Encoding: every JSON body, NDJSON line and MCP tool text leaves <, >
//     and & unescaped (NewEncoder).
//
// MCPServer has the tools bash (live output as progress notifications, a
// progress heartbeat after Config.Heartbeat of silence,
// the Result as structured content; background: true starts a job),
// job_output, job_input, job_kill, job_list, read_output and grep_output. Their
// descriptions state the limits verbatim, as the specification asks.
package api
