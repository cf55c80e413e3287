package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

func withTokens(tok string, more ...string) option {
	return func(c *api.Config, _ *supervisor.Config) { c.Token, c.Tokens = tok, more }
}

func withSharedJobs() option {
	return func(c *api.Config, _ *supervisor.Config) { c.SharedJobs = true }
}

// startedJob starts a background job through call and returns its ID.
func startedJob(t *testing.T, call func(string, map[string]any) (string, bool)) string {
	t.Helper()
	text, isErr := call(api.ToolBash, map[string]any{"command": "sleep 30", "background": true})
	if isErr {
		t.Fatalf("start: %s", text)
	}
	i := strings.Index(text, "j-")
	if i < 0 {
		t.Fatalf("no job id in %q", text)
	}
	return text[i : i+18]
}

// TestTenancyMCPSessions: a job started in one MCP session is NOT_FOUND in
// another (output, input, kill), absent from its job_list, and NOT_FOUND
// over HTTP with the server's token; its own session reads and kills it.
func TestTenancyMCPSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withToken(testToken))
	a, b := mcpTextCaller(t, e, "2025-11-25"), mcpTextCaller(t, e, "2025-11-25")
	id := startedJob(t, a)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{api.ToolJobOutput, map[string]any{"id": id}},
		{api.ToolJobInput, map[string]any{"id": id, "data": "x"}},
		{api.ToolJobKill, map[string]any{"id": id}},
	} {
		if text, isErr := b(c.tool, c.args); !isErr || !strings.HasPrefix(text, "NOT_FOUND: no job ") {
			t.Errorf("%s from another session: %q (error %v), want NOT_FOUND", c.tool, text, isErr)
		}
	}
	if text, _ := b(api.ToolJobList, nil); strings.Contains(text, id) {
		t.Errorf("job_list of another session lists %s: %s", id, text)
	}
	if code, body := e.do(context.Background(), "GET", "/v1/jobs/"+id+"/output", ""); code != http.StatusNotFound {
		t.Errorf("HTTP output of an MCP session's job: %d %s", code, body)
	}
	if code, body := e.do(context.Background(), "DELETE", "/v1/jobs/"+id, ""); code != http.StatusNotFound {
		t.Errorf("HTTP kill of an MCP session's job: %d %s", code, body)
	}
	if text, _ := a(api.ToolJobList, nil); !strings.Contains(text, id) {
		t.Errorf("job_list of the owner lacks %s: %s", id, text)
	}
	if text, isErr := a(api.ToolJobKill, map[string]any{"id": id}); isErr {
		t.Errorf("the owner's kill: %s", text)
	}
}

// TestTenancyTokens: a job started with one token is NOT_FOUND with
// another on every job route, and missing from its list; the owner token
// reaches it, and so does an MCP call without a session carrying it.
func TestTenancyTokens(t *testing.T) {
	t.Parallel()
	const other = "other-token"
	e := newEnv(t, withTokens(testToken, other))
	code, body := e.do(context.Background(), "POST", "/v1/jobs", `{"command": "sleep 30", "interactive": true}`)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	var st supervisor.JobStarted
	json.Unmarshal(body, &st)
	asOther := []string{"Authorization", "Bearer " + other}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/jobs/" + st.ID + "/output", ""},
		{"POST", "/v1/jobs/" + st.ID + "/stdin", "x"},
		{"POST", "/v1/jobs/" + st.ID + "/wait?timeout=0", ""},
		{"DELETE", "/v1/jobs/" + st.ID, ""},
	} {
		code, body := e.do(context.Background(), r.method, r.path, r.body, asOther...)
		if code != http.StatusNotFound || errorCode(t, body) != "NOT_FOUND" || !strings.Contains(string(body), `no job \"`+st.ID) {
			t.Errorf("%s %s with another token: %d %s", r.method, r.path, code, body)
		}
	}
	if _, body := e.do(context.Background(), "GET", "/v1/jobs", "", asOther...); strings.Contains(string(body), st.ID) {
		t.Errorf("another token's list holds the job: %s", body)
	}
	if _, body := e.do(context.Background(), "GET", "/v1/jobs", ""); !strings.Contains(string(body), st.ID) {
		t.Errorf("the owner's list lacks the job: %s", body)
	}
	// An MCP call without a session belongs to its token.
	mine := mcpTextCaller(t, e, "2026-07-28")
	if text, isErr := mine(api.ToolJobOutput, map[string]any{"id": st.ID}); isErr {
		t.Errorf("sessionless MCP with the owner's token: %s", text)
	}
	if code, body := e.do(context.Background(), "DELETE", "/v1/jobs/"+st.ID, ""); code != http.StatusOK {
		t.Errorf("the owner's kill: %d %s", code, body)
	}
}

// TestTenancyShared: with SharedJobs every client reaches every job.
func TestTenancyShared(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSharedJobs())
	a, b := mcpTextCaller(t, e, "2025-11-25"), mcpTextCaller(t, e, "2025-11-25")
	id := startedJob(t, a)
	if text, _ := b(api.ToolJobList, nil); !strings.Contains(text, id) {
		t.Errorf("shared job_list lacks %s: %s", id, text)
	}
	if code, body := e.do(context.Background(), "DELETE", "/v1/jobs/"+id, ""); code != http.StatusOK {
		t.Errorf("shared HTTP kill: %d %s", code, body)
	}
}

// mcpTextCaller is mcpCaller returning a call's text and whether it is a
// tool error.
func mcpTextCaller(t *testing.T, e *env, version string) func(string, map[string]any) (string, bool) {
	call := mcpCaller(t, e, version)
	return func(name string, args map[string]any) (string, bool) {
		r := call(name, args)
		return toolText(r), r.IsError
	}
}

// bearerTransport sends the token, when there is one, on every request.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}
