package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/supervisor"
)

// update rewrites the generated contract files (api/openapi.json and the
// golden files under api/testdata/golden) from the code instead of
// comparing them: go test ./api -run 'TestOpenAPIDocument|TestGolden' -update.
var update = flag.Bool("update", false, "rewrite api/openapi.json and api/testdata/golden from the code")

// The OpenAPI document (api/openapi.json, served by GET /openapi.json) is
// generated here: its schemas from the wire types with jsonschema-go, its
// paths from the table below. TestOpenAPIDocument fails when the committed
// file differs from what this makes, so a changed wire type or route shows
// up as a diff of the document.

// component is one named schema of the document, made from a Go type.
type component struct {
	name string
	typ  reflect.Type
	desc string
	// types maps more Go types to schemas for this component only.
	types map[reflect.Type]*jsonschema.Schema
}

// historyPage is the body of GET /v1/sessions/{id}/results, which the
// server writes from the journal's stored bytes (api/sessions.go).
type historyPage struct {
	Entries []journal.Entry `json:"entries"`
	Next    uint64          `json:"next"`
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func ref(name string) *jsonschema.Schema {
	return &jsonschema.Schema{Ref: "#/components/schemas/" + name}
}

var components = []component{
	{name: "Result", typ: typeOf[supervisor.Result](), desc: "What a command produced: the model views of stdout and stderr (markers where cut), how it ended, what was killed. exitCode is null when the shell did not exit by itself. id is the journal ID (r-…) where a Result names its entry (batch results). The optional fields are absent when empty."},
	{name: "StreamInfo", typ: typeOf[budget.Info](), desc: "What one stream's model view kept of the whole stream."},
	{name: "KillInfo", typ: typeOf[supervisor.KillInfo](), desc: "How the command's tree was ended: the containment tier, the processes killed after the shell ended, those it left behind, and those found outside the containment or still alive."},
	{name: "Usage", typ: typeOf[supervisor.Usage](), desc: "What the whole tree used, from the containment's accounting."},
	{name: "Waiting", typ: typeOf[supervisor.Waiting](), desc: "A process of the tree blocks reading the job's stdin pipe or terminal. argv is null when the process's command line could not be read."},
	{name: "TTYSize", typ: typeOf[supervisor.TTYSize](), desc: "A terminal's size; an absent or 0 side of a request is 120 columns or 40 rows."},
	{name: "ExecRequest", typ: typeOf[api.ExecRequest](), desc: "A command to run (POST /v1/exec, and each request of a batch). Unknown keys are refused."},
	{name: "Limits", typ: typeOf[api.LimitsRequest](), desc: "Resource limits of the command's whole tree; an absent field takes the server's default, which is also the most a request may ask for."},
	{name: "JobRequest", typ: typeOf[api.JobRequest](), desc: "A background job: an ExecRequest plus its lifetime and whether its stdin stays open."},
	{name: "BatchRequest", typ: typeOf[api.BatchBody](), desc: "Several commands run as one batch."},
	{name: "ReadRequest", typ: typeOf[api.ReadRequest](), desc: "A window of lines of a spill file."},
	{name: "GrepRequest", typ: typeOf[api.GrepRequest](), desc: "A search of a spill file."},
	{name: "ExecEvent", typ: typeOf[supervisor.Event](), desc: "One live event of POST /v1/exec with Accept: application/x-ndjson: start (pid), output (stream, seq, data), capped (stream, seq), waiting (waiting), keepalive (nothing else), result (result, always the last line)."},
	{name: "JobEvent", typ: typeOf[supervisor.JobEvent](), desc: "One event of the caller's background jobs (GET /v1/events): exited (with the Result) or waiting (with the wait)."},
	{name: "JobStarted", typ: typeOf[supervisor.JobStarted](), desc: "A started background job."},
	{name: "JobInfo", typ: typeOf[supervisor.JobInfo](), desc: "One background job in a listing."},
	{name: "JobStatus", typ: typeOf[supervisor.JobStatus](), desc: "One background job's status, with its Result once it exited."},
	{name: "JobList", typ: typeOf[api.JobList](), desc: "The caller's background jobs, oldest first."},
	{name: "JobOutput", typ: typeOf[supervisor.JobOutput](), desc: "One read of a job's stream: after and next are byte offsets in the stream, skippedBytes what the reader missed because the ring moved on; result appears once the job exited."},
	{name: "Screen", typ: typeOf[supervisor.Screen](), desc: "A terminal job's screen as it looks."},
	{name: "Cursor", typ: typeOf[supervisor.Cursor](), desc: "The terminal cursor, 0-based."},
	{name: "Batch", typ: typeOf[supervisor.BatchResult](), desc: "A batch's Results in request order, each with its journal ID, and the batch's model view."},
	{name: "ReadResult", typ: typeOf[budget.ReadResult](), desc: "A window of a spill file. totalLines appears once the end of the file was reached."},
	{name: "GrepResult", typ: typeOf[budget.GrepResult](), desc: "The lines of a spill file that matched."},
	{name: "GrepMatch", typ: typeOf[budget.GrepMatch](), desc: "One matching line, 1-based."},
	{name: "SessionList", typ: typeOf[api.SessionList](), desc: "Every session the server knows, most recently used first."},
	{name: "SessionSummary", typ: typeOf[api.SessionSummary](), desc: "One session: results counts its journal entries, jobs its running background jobs."},
	{name: "SessionDetail", typ: typeOf[api.SessionDetail](), desc: "One session: envNames names the variables it carries (never their values); jobs lists its background jobs, running and retained."},
	{name: "HistoryEntry", typ: typeOf[journal.Entry](), desc: "One journal entry; byte-identical every time it is read.",
		types: map[reflect.Type]*jsonschema.Schema{typeOf[json.RawMessage](): ref("Result")}},
	{name: "HistoryPage", typ: typeOf[historyPage](), desc: "Journal entries of a session with a seq above after; next is the after of the following page."},
	{name: "Error", typ: typeOf[api.ErrorBody](), desc: "The error JSON of every route and every status."},
	{name: "ErrorDetail", typ: typeOf[api.ErrorDetail](), desc: "An error's code and message."},
	{name: "Health", typ: typeOf[api.Health](), desc: "The server is up."},
}

// nonNull names the array properties that the code never leaves nil, so
// they are never null on the wire (jsonschema-go allows null for every
// slice); the live validation (TestOpenAPILive) checks what it sees.
var nonNull = []string{
	"JobList.jobs", "Batch.results", "Screen.lines", "GrepResult.matches", "SessionList.sessions",
	"SessionDetail.envNames", "SessionDetail.jobs", "HistoryPage.entries",
}

// enums are the closed sets of string values.
var enums = map[string][]any{
	"Result.limit":               {"memory", "pids"},
	"ExecRequest.stdoutPolicy":   {"head", "tail", "head+tail"},
	"ExecRequest.stderrPolicy":   {"head", "tail", "head+tail"},
	"JobRequest.stdoutPolicy":    {"head", "tail", "head+tail"},
	"JobRequest.stderrPolicy":    {"head", "tail", "head+tail"},
	"ExecEvent.event":            {"start", "output", "capped", "waiting", "keepalive", "result"},
	"ExecEvent.stream":           {"stdout", "stderr"},
	"JobEvent.event":             {"exited", "waiting"},
	"JobInfo.state":              {"running", "exited"},
	"JobStatus.state":            {"running", "exited"},
	"JobOutput.state":            {"running", "exited"},
	"JobOutput.stream":           {"stdout", "stderr"},
	"Waiting.kind":               {"line", "password", "key"},
	"ErrorDetail.code":           errorCodes,
	"KillInfo.tier":              {"cgroup2", "cgroup1", "pgroup", "job", ""},
	"ReadResult.root":            {"scratch"},
	"Health.status":              {"ok"},
	"Result.limitsNotEnforced[]": {"memory", "cpus", "pids"},
}

var errorCodes = []any{api.CodeInvalidArgument, api.CodeNotFound, api.CodeBinaryContent, api.CodeUnauthenticated,
	api.CodePermissionDenied, api.CodeDeadlineExceeded, api.CodeResourceExhausted, api.CodeUnavailable, api.CodeInternal}

// schemas makes the document's component schemas.
func schemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	refs := map[reflect.Type]*jsonschema.Schema{}
	names := map[string]bool{}
	for _, c := range components {
		refs[c.typ] = ref(c.name)
		names[c.name] = true
	}
	out := map[string]*jsonschema.Schema{}
	for _, c := range components {
		types := maps.Clone(refs)
		delete(types, c.typ)
		for _, f := range reflect.VisibleFields(c.typ) {
			if f.Anonymous {
				delete(types, f.Type) // jsonschema-go inlines an embedded struct's fields
			}
		}
		maps.Copy(types, c.types)
		s, err := jsonschema.ForType(c.typ, &jsonschema.ForOptions{TypeSchemas: types})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tidy(t, c.name, s)
		s.Description = c.desc
		out[c.name] = s
	}
	for _, p := range nonNull {
		s := property(t, out, p)
		if !slices.Equal(s.Types, []string{"null", "array"}) {
			t.Fatalf("nonNull %s: types %v", p, s.Types)
		}
		s.Type, s.Types = "array", nil
	}
	for p, vals := range enums {
		property(t, out, p).Enum = vals
	}
	// The two NDJSON line schemas and the keepalive, which has no Go type.
	out["Keepalive"] = &jsonschema.Schema{Type: "object", Description: `Sent after the heartbeat (15 s by default) without another line: {"event":"keepalive"}.`,
		Properties: map[string]*jsonschema.Schema{"event": {Type: "string", Const: ptrTo[any]("keepalive")}},
		Required:   []string{"event"}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	out["ExecLine"] = &jsonschema.Schema{Description: "One line of the NDJSON form of POST /v1/exec: an event, or the error JSON when the command failed after the stream began (then it is the last line).",
		AnyOf: []*jsonschema.Schema{ref("ExecEvent"), ref("Error")}}
	out["EventsLine"] = &jsonschema.Schema{Description: "One line of GET /v1/events.",
		AnyOf: []*jsonschema.Schema{ref("JobEvent"), ref("Keepalive")}}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// property finds the schema at path, "Component.prop" with "[]" for an
// array's items and "{}" for a map's values.
func property(t *testing.T, all map[string]*jsonschema.Schema, path string) *jsonschema.Schema {
	t.Helper()
	name, rest, _ := strings.Cut(path, ".")
	s := all[name]
	for s != nil && rest != "" {
		switch {
		case strings.HasSuffix(rest, "[]"):
			s = property(t, map[string]*jsonschema.Schema{"x": s}, "x."+strings.TrimSuffix(rest, "[]")).Items
			rest = ""
		case strings.HasSuffix(rest, "{}"):
			s = property(t, map[string]*jsonschema.Schema{"x": s}, "x."+strings.TrimSuffix(rest, "{}")).AdditionalProperties
			rest = ""
		default:
			s, rest = s.Properties[rest], ""
		}
	}
	if s == nil {
		t.Fatalf("no schema at %s", path)
	}
	return s
}

// tidy rewrites what jsonschema-go makes of Go's optional fields: a field
// that is omitted when empty (not required) is never null on the wire, so
// its type loses "null"; a pointer to a component becomes its $ref, and a
// required one {"anyOf": [$ref, null]}. What stays nullable is a required
// pointer or slice (exitCode, argv).
func tidy(t *testing.T, at string, s *jsonschema.Schema) {
	t.Helper()
	for name, p := range s.Properties {
		required := slices.Contains(s.Required, name)
		switch {
		case p.Ref != "" && slices.Equal(p.Types, []string{"null"}) && required:
			s.Properties[name] = &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Ref: p.Ref}, {Type: "null"}}}
		case p.Ref != "" && slices.Equal(p.Types, []string{"null"}):
			p.Types = nil
		case len(p.Types) == 2 && p.Types[0] == "null" && !required:
			p.Type, p.Types = p.Types[1], nil
		case len(p.Types) > 0 && !required:
			t.Fatalf("%s.%s: types %v", at, name, p.Types)
		}
		tidy(t, at+"."+name, s.Properties[name])
	}
	if s.Items != nil {
		tidy(t, at+"[]", s.Items)
	}
	if s.AdditionalProperties != nil {
		tidy(t, at+"{}", s.AdditionalProperties)
	}
}

// operation is one route of the document.
type operation struct {
	method, path, id, summary, desc string
	public                          bool           // served without the token
	params                          []any          // parameter objects
	body                            map[string]any // the requestBody
	ok                              map[string]any // success responses by status
	errs                            []int          // the error statuses the route itself gives
}

// errorResponses names the response component of each error status.
var errorResponses = map[int]string{
	400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
	408: "RequestTimeout", 413: "TooLarge", 429: "TooManyRequests", 500: "Internal", 503: "Unavailable",
}

func jsonContent(schema any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schema}}
}

func schemaRef(name string) map[string]any {
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

func jsonBody(name string) map[string]any {
	return map[string]any{"required": true, "content": jsonContent(schemaRef(name))}
}

func jsonResponse(desc, name string) map[string]any {
	return map[string]any{"description": desc, "content": jsonContent(schemaRef(name))}
}

func query(name, desc string, schema map[string]any) map[string]any {
	return map[string]any{"name": name, "in": "query", "description": desc, "schema": schema}
}

func pathParam(name string) map[string]any {
	return map[string]any{"$ref": "#/components/parameters/" + name}
}

var (
	seconds = func(max float64) map[string]any {
		return map[string]any{"type": "number", "minimum": 0, "maximum": max}
	}
	noContent = map[string]any{"204": map[string]any{"description": "Done; no body."}}
	streamQ   = query("stream", "stdout (the default) or stderr.", map[string]any{"type": "string", "enum": []any{"stdout", "stderr"}})
)

// withBody are the errors of every route that reads a JSON body: a body
// that is not a valid request, one that took too long to arrive, one too
// large.
var withBody = []int{400, 408, 413}

var operations = []operation{
	{method: "GET", path: "/healthz", id: "health", summary: "Is the server up", public: true,
		desc: "Served without the token. version is the server's, tier the containment tier its commands run under.",
		ok:   map[string]any{"200": jsonResponse("The server is up.", "Health")}},
	{method: "GET", path: "/openapi.json", id: "openapi", summary: "This document", public: true,
		desc: "The HTTP contract as OpenAPI 3.1, served without the token. The prose is docs/wire.md.",
		ok:   map[string]any{"200": map[string]any{"description": "The OpenAPI document.", "content": jsonContent(map[string]any{"type": "object"})}}},
	{method: "GET", path: "/metrics", id: "metrics", summary: "Prometheus metrics",
		desc: "The server's metrics in the Prometheus text format (or OpenMetrics when the Accept header asks for it and the server offers it); the families are described in docs/server.md (Metrics).",
		ok: map[string]any{"200": map[string]any{"description": "The metrics.", "content": map[string]any{
			"text/plain":                   map[string]any{"schema": map[string]any{"type": "string"}},
			"application/openmetrics-text": map[string]any{"schema": map[string]any{"type": "string"}},
		}}}},
	{method: "POST", path: "/v1/exec", id: "exec", summary: "Run a command and return its Result",
		desc: "Runs the command in a fresh shell in a fresh containment and answers when it ended (or at its yield). A command that fails, times out or is killed is still a 200 with its Result. With Accept: application/x-ndjson the response is a stream of live events instead, one JSON object a line (ExecLine), result last; an error before the first event is an error response with its status, one after it the error JSON as the last line.",
		body: jsonBody("ExecRequest"),
		ok: map[string]any{"200": map[string]any{"description": "The Result, or the live events.", "content": map[string]any{
			"application/json":     map[string]any{"schema": schemaRef("Result")},
			"application/x-ndjson": map[string]any{"schema": schemaRef("ExecLine")},
		}}},
		errs: append(withBody, 429)},
	{method: "POST", path: "/v1/batch", id: "batch", summary: "Run several commands as one batch",
		desc: "Validates every request before anything starts, then runs them at most concurrency at once, holding that many command slots (429 when they are not free; nothing starts). The answer, and GET /v1/sessions/{id}/batches/{bid} later, is the batch's JSON byte for byte.",
		body: jsonBody("BatchRequest"), ok: map[string]any{"200": jsonResponse("The batch.", "Batch")}, errs: append(withBody, 429)},
	{method: "POST", path: "/v1/jobs", id: "startJob", summary: "Start a background job",
		desc: "Starts the command as a background job owned by the caller's token and answers at once.",
		body: jsonBody("JobRequest"), ok: map[string]any{"200": jsonResponse("The job started.", "JobStarted")}, errs: append(withBody, 429)},
	{method: "GET", path: "/v1/jobs", id: "listJobs", summary: "List the caller's background jobs",
		ok: map[string]any{"200": jsonResponse("The caller's jobs, running and retained.", "JobList")}},
	{method: "GET", path: "/v1/jobs/{id}", id: "getJob", summary: "One job's status",
		params: []any{pathParam("JobID")}, ok: map[string]any{"200": jsonResponse("The job's status; result once it exited.", "JobStatus")}, errs: []int{404}},
	{method: "DELETE", path: "/v1/jobs/{id}", id: "killJob", summary: "Kill a job's whole tree",
		params: []any{pathParam("JobID")}, ok: map[string]any{"200": jsonResponse("The job's Result (the tree is killed).", "Result")}, errs: []int{404}},
	{method: "GET", path: "/v1/jobs/{id}/output", id: "jobOutput", summary: "Read a job's output from a cursor",
		desc: "Returns the bytes of the stream after the cursor, waiting up to wait seconds for some to arrive. Without after the read continues where the previous cursorless read of that stream ended.",
		params: []any{pathParam("JobID"), streamQ,
			query("after", "Byte offset in the stream to read from, 0 or more; absent continues from the previous cursorless read.", map[string]any{"type": "integer", "minimum": 0}),
			query("wait", "Seconds to wait for output when there is none yet, 0 (the default) to 30.", seconds(supervisor.MaxOutputWait.Seconds()))},
		ok: map[string]any{"200": jsonResponse("The read.", "JobOutput")}, errs: []int{400, 404}},
	{method: "POST", path: "/v1/jobs/{id}/stdin", id: "jobStdin", summary: "Write to an interactive job's stdin",
		desc: "The raw body is written to the job's stdin pipe (or its terminal). close=true closes stdin after it. With yield the call then waits up to yield seconds for output (returning as soon as the job exits or waits for input again) and answers as an output read does; without it the answer is 204.",
		params: []any{pathParam("JobID"),
			query("close", "true closes stdin after the body is written (not on a terminal: write \\u0004 there).", map[string]any{"type": "boolean"}),
			query("yield", "Seconds to wait for output after the write, above 0 and at most 30.", map[string]any{"type": "number", "exclusiveMinimum": 0, "maximum": supervisor.MaxOutputWait.Seconds()}),
			query("stream", "With yield: the stream to read, stdout (the default) or stderr.", map[string]any{"type": "string", "enum": []any{"stdout", "stderr"}})},
		body: map[string]any{"content": map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "contentMediaType": "application/octet-stream"}}},
			"description": "The bytes to write, as they are (any Content-Type); an empty body writes nothing."},
		ok:   map[string]any{"200": jsonResponse("With yield: the output that followed.", "JobOutput"), "204": noContent["204"]},
		errs: []int{400, 404, 408, 413}},
	{method: "POST", path: "/v1/jobs/{id}/wait", id: "waitJob", summary: "Wait for a job to end",
		params: []any{pathParam("JobID"),
			query("timeout", "Seconds to wait, 0 (do not wait) to the server's maximum timeout (300 by default); absent means 30.", seconds(supervisor.MaxTimeout.Seconds()))},
		ok:   map[string]any{"200": jsonResponse("The job's Result.", "Result")},
		errs: []int{400, 404, 408}, desc: "Answers the Result when the job ended within the timeout; 408 DEADLINE_EXCEEDED when it still runs at the deadline (the job goes on)."},
	{method: "POST", path: "/v1/jobs/{id}/resize", id: "resizeJob", summary: "Resize a terminal job's terminal",
		params: []any{pathParam("JobID")}, body: jsonBody("TTYSize"), ok: noContent, errs: append([]int{404}, withBody...)},
	{method: "GET", path: "/v1/jobs/{id}/screen", id: "jobScreen", summary: "A terminal job's screen",
		params: []any{pathParam("JobID")}, ok: map[string]any{"200": jsonResponse("The screen.", "Screen")}, errs: []int{400, 404}},
	{method: "GET", path: "/v1/events", id: "events", summary: "Stream the caller's job events",
		desc: "NDJSON, one line per event of the caller's background jobs from the moment of the request (EventsLine): exited with the Result, waiting once per wait; a keepalive after the heartbeat without another line. The stream ends when the client goes or the server shuts down; a client 256 events behind loses the oldest.",
		ok: map[string]any{"200": map[string]any{"description": "The event stream.", "content": map[string]any{
			"application/x-ndjson": map[string]any{"schema": schemaRef("EventsLine")}}}}},
	{method: "POST", path: "/v1/read", id: "read", summary: "Read a window of a spill file",
		body: jsonBody("ReadRequest"), ok: map[string]any{"200": jsonResponse("The window.", "ReadResult")}, errs: append([]int{404}, withBody...),
		desc: "Only regular files beneath the data directory, opened without following symlinks; binary content is 400 TOOL_BINARY_CONTENT."},
	{method: "POST", path: "/v1/grep", id: "grep", summary: "Search a spill file",
		body: jsonBody("GrepRequest"), ok: map[string]any{"200": jsonResponse("The matches.", "GrepResult")}, errs: append([]int{404}, withBody...)},
	{method: "GET", path: "/v1/sessions", id: "listSessions", summary: "List the sessions",
		ok: map[string]any{"200": jsonResponse("The sessions.", "SessionList")}},
	{method: "GET", path: "/v1/sessions/{id}", id: "getSession", summary: "One session",
		params: []any{pathParam("SessionID")}, ok: map[string]any{"200": jsonResponse("The session.", "SessionDetail")}, errs: []int{400, 404}},
	{method: "DELETE", path: "/v1/sessions/{id}", id: "deleteSession", summary: "Delete a session",
		desc:   "Kills its jobs and removes its state, journal entries and spill files; 204 also when it had none.",
		params: []any{pathParam("SessionID")}, ok: noContent, errs: []int{400}},
	{method: "GET", path: "/v1/sessions/{id}/results", id: "listResults", summary: "A session's journal, a page at a time",
		params: []any{pathParam("SessionID"),
			query("after", "The seq to list after, 0 (the default) or more.", map[string]any{"type": "integer", "minimum": 0}),
			query("limit", fmt.Sprintf("Entries at most, 1 to %d; absent means %d.", journal.MaxList, api.DefaultHistoryLimit), map[string]any{"type": "integer", "minimum": 1, "maximum": journal.MaxList})},
		ok: map[string]any{"200": jsonResponse("The page.", "HistoryPage")}, errs: []int{400, 404}},
	{method: "GET", path: "/v1/sessions/{id}/results/{rid}", id: "getResult", summary: "One journal entry",
		params: []any{pathParam("SessionID"), map[string]any{"name": "rid", "in": "path", "required": true, "description": "The entry's ID (r-…).", "schema": map[string]any{"type": "string"}}},
		ok:     map[string]any{"200": jsonResponse("The entry, byte-identical every time.", "HistoryEntry")}, errs: []int{400, 404}},
	{method: "GET", path: "/v1/sessions/{id}/batches/{bid}", id: "getBatch", summary: "One batch, as POST /v1/batch answered it",
		params: []any{pathParam("SessionID"), map[string]any{"name": "bid", "in": "path", "required": true, "description": "The batch's ID (b-…).", "schema": map[string]any{"type": "string"}}},
		ok:     map[string]any{"200": jsonResponse("The batch's JSON, byte for byte, also after a restart.", "Batch")}, errs: []int{400, 404}},
	mcpOperation("POST", "mcpPost", "Send MCP messages (streamable HTTP)", "A JSON-RPC message or batch of the Model Context Protocol; the answer is JSON or an SSE stream. See docs/mcp.md."),
	mcpOperation("GET", "mcpListen", "Open an MCP session's server-to-client stream", "The SSE stream of an MCP session (Mcp-Session-Id). See docs/mcp.md."),
	mcpOperation("DELETE", "mcpEnd", "End an MCP session", "Ends the MCP session named by Mcp-Session-Id. See docs/mcp.md."),
}

// mcpOperation is one method of /mcp, which the document treats as opaque:
// its protocol is MCP's, described by that specification.
func mcpOperation(method, id, summary, desc string) operation {
	op := operation{method: method, path: "/mcp", id: id, summary: summary, desc: desc, errs: []int{400, 404, 413, 429}}
	switch method {
	case "POST":
		op.body = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{}}}}
		op.ok = map[string]any{"200": map[string]any{"description": "The MCP answer, as JSON or an SSE stream.", "content": map[string]any{
			"application/json": map[string]any{"schema": map[string]any{}}, "text/event-stream": map[string]any{"schema": map[string]any{"type": "string"}}}},
			"202": map[string]any{"description": "Accepted: the POST carried only notifications or responses."}}
	case "GET":
		op.ok = map[string]any{"200": map[string]any{"description": "The session's SSE stream.", "content": map[string]any{
			"text/event-stream": map[string]any{"schema": map[string]any{"type": "string"}}}}}
	case "DELETE":
		op.ok = noContent
	}
	return op
}

// openAPIDocument makes the document.
func openAPIDocument(t *testing.T) []byte {
	t.Helper()
	paths := map[string]map[string]any{}
	for _, op := range operations {
		o := map[string]any{"operationId": op.id, "summary": op.summary}
		if op.desc != "" {
			o["description"] = op.desc
		}
		if op.public {
			o["security"] = []any{}
		}
		if len(op.params) > 0 {
			o["parameters"] = op.params
		}
		if op.body != nil {
			o["requestBody"] = op.body
		}
		responses := maps.Clone(op.ok)
		errs := append([]int{403, 500, 503}, op.errs...)
		if !op.public {
			errs = append(errs, 401)
		}
		for _, code := range errs {
			responses[fmt.Sprint(code)] = map[string]any{"$ref": "#/components/responses/" + errorResponses[code]}
		}
		o["responses"] = responses
		if paths[op.path] == nil {
			paths[op.path] = map[string]any{}
		}
		paths[op.path][strings.ToLower(op.method)] = o
	}
	responses := map[string]any{}
	for code, name := range errorResponses {
		r := jsonResponse(errorDescriptions[code], "Error")
		switch code {
		case 401:
			r["headers"] = map[string]any{"WWW-Authenticate": map[string]any{"description": `Bearer realm="corral"`, "schema": map[string]any{"type": "string"}}}
		case 429, 503:
			r["headers"] = map[string]any{"Retry-After": map[string]any{"description": "Seconds to wait before retrying.", "schema": map[string]any{"type": "integer"}}}
		}
		responses[name] = r
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "corral HTTP API",
			"version":     "1",
			"description": "corral runs shell commands in a containment it can always kill completely and returns bounded, honest Results. Every request except GET /healthz and GET /openapi.json needs the bearer token when the server has one. Every error, of every status, is the Error JSON; a method a path does not serve is 405 INVALID_ARGUMENT, with an Allow header and a message naming the allowed methods. Request bodies are decoded strictly: exact key names, no duplicate keys, valid UTF-8. The prose contract is docs/wire.md.",
		},
		"servers":  []any{map[string]any{"url": "/", "description": "The server that serves this document."}},
		"security": []any{map[string]any{"bearer": []any{}}},
		"paths":    paths,
		"components": map[string]any{
			"schemas":         schemas(t),
			"responses":       responses,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "--token-file, CORRAL_TOKEN or the generated <dataDir>/token; none with --insecure-no-auth."}},
			"parameters": map[string]any{
				"JobID":     map[string]any{"name": "id", "in": "path", "required": true, "description": "The job's ID (j-…); another owner's job is 404 like an unknown one.", "schema": map[string]any{"type": "string"}},
				"SessionID": map[string]any{"name": "id", "in": "path", "required": true, "description": "The session's name: [A-Za-z0-9._-], 1 to 128 bytes.", "schema": map[string]any{"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"}},
			},
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var errorDescriptions = map[int]string{
	400: "INVALID_ARGUMENT (a request that is not valid) or TOOL_BINARY_CONTENT (a spill file that holds binary content).",
	401: "UNAUTHENTICATED: a missing or wrong bearer token; the connection is closed.",
	403: "PERMISSION_DENIED: a cross-origin browser request, or a host name that is not a loopback name on a loopback address.",
	404: "NOT_FOUND: no such route, job, session, entry, batch or spill file (another owner's job included).",
	408: "DEADLINE_EXCEEDED: the request body did not arrive within the body timeout, or a wait passed its deadline.",
	413: "RESOURCE_EXHAUSTED: the request body exceeds 1 MiB.",
	429: "RESOURCE_EXHAUSTED: every command slot is taken, or the live-job limit is reached; retry after Retry-After.",
	500: "INTERNAL: a failure of the server.",
	503: "UNAVAILABLE: the server is shutting down or has as many connections open as it allows.",
}

// TestOpenAPIDocument: api/openapi.json is what the generator makes from
// the wire types and the route table (-update rewrites it).
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	want := openAPIDocument(t)
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := api.OpenAPI()
	if !bytes.Equal(got, want) {
		t.Errorf("api/openapi.json is not what the wire types make (go test ./api -run TestOpenAPIDocument -update):\n%s",
			cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")))
	}
}

// TestOpenAPIRoutes: every route registered on a ServeMux in the package
// (a mux.Handle or mux.HandleFunc call with a literal pattern) is a path
// and method of the document, and every operation of the document is a
// registered route. A pattern without a method (/mcp) needs the path.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	registered := muxPatterns(t)
	if len(registered) < 20 {
		t.Fatalf("found only %d routes: %v", len(registered), registered)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	for _, p := range registered {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			if doc.Paths[p] == nil {
				t.Errorf("route %q has no path in the document", p)
			}
			continue
		}
		if !documented[method+" "+path] {
			t.Errorf("route %q is not in the document", p)
		}
	}
	for op := range documented {
		method, path, _ := strings.Cut(op, " ")
		if !slices.Contains(registered, op) && !slices.Contains(registered, path) {
			t.Errorf("the document has %s %s, which no mux serves", method, path)
		}
	}
}

// muxPatterns parses the package's non-test files and returns the literal
// patterns of its Handle and HandleFunc calls.
func muxPatterns(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: a route whose pattern is not a literal", fset.Position(call.Pos()))
				return true
			}
			p, _ := strconv.Unquote(lit.Value)
			out = append(out, p)
			return true
		})
	}
	return out
}
