package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// jobRoutes are the operations of the OpenAPI document on one job
// (/v1/jobs/{id}…), each with a request the route takes.
func jobRoutes(t *testing.T, id string) []struct{ method, path, body string } {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	json.Unmarshal(api.OpenAPI(), &doc)
	query := map[string]string{"/wait": "?timeout=0", "/output": "?wait=0"}
	bodies := map[string]string{"/resize": `{"cols":70,"rows":12}`, "/stdin": "x"}
	var out []struct{ method, path, body string }
	for path, ops := range doc.Paths {
		rest, ok := strings.CutPrefix(path, "/v1/jobs/{id}")
		if !ok {
			continue
		}
		for method := range ops {
			out = append(out, struct{ method, path, body string }{strings.ToUpper(method), "/v1/jobs/" + id + rest + query[rest], bodies[rest]})
		}
	}
	if len(out) < 7 {
		t.Fatalf("only %d job routes: %v", len(out), out)
	}
	return out
}

// jobTools are the corral tools that take a job's id, each with arguments
// it takes (those of its schema).
func jobTools(t *testing.T, cs *mcp.ClientSession, id string) map[string]map[string]any {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, tool := range tools.Tools {
		raw, _ := json.Marshal(tool.InputSchema)
		var sch struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		json.Unmarshal(raw, &sch)
		if _, ok := sch.Properties["id"]; !ok {
			continue
		}
		args := map[string]any{"id": id}
		if _, ok := sch.Properties["data"]; ok {
			args["data"] = "x"
		}
		if _, ok := sch.Properties["timeout"]; ok {
			args["timeout"] = 0.05 // job_wait: not the 30 s default
		}
		out[tool.Name] = args
	}
	if len(out) < 5 {
		t.Fatalf("only %d job tools: %v", len(out), out)
	}
	return out
}

// TestTenancyEveryRoute: a terminal job started with one token is
// NOT_FOUND for another token on every job route of the document, on every
// job tool (over MCP without a session with that token, and in an MCP
// session), for resources/read, absent from its job list, its
// resources/list and its session's detail, and its events do not reach
// the other token's /v1/events. With --shared-jobs every one of them
// reaches it.
func TestTenancyEveryRoute(t *testing.T) {
	t.Parallel()
	const other = "other-token"
	for _, shared := range []bool{false, true} {
		opts := []option{withTokens(testToken, other)}
		if shared {
			opts = append(opts, withSharedJobs())
		}
		e := newEnv(t, opts...)
		ctx := context.Background()
		asOther := []string{"Authorization", "Bearer " + other}
		events := e.send(ctx, "GET", "/v1/events", "", asOther...)
		defer events.Body.Close()

		code, body := e.do(ctx, "POST", "/v1/jobs", `{"command":"printf 'user: '; read x; sleep 30","tty":{"cols":60,"rows":10},"session":"t1"}`)
		if code != http.StatusOK {
			t.Fatalf("start: %d %s", code, body)
		}
		var st supervisor.JobStarted
		json.Unmarshal(body, &st)
		notFound := func(what string, found bool, text string) {
			t.Helper()
			if found == shared {
				return
			}
			t.Errorf("shared %v: %s: found %v: %s", shared, what, found, text)
		}

		for _, r := range jobRoutes(t, st.ID) {
			if r.method == "DELETE" {
				continue // last, below
			}
			code, body := e.do(ctx, r.method, r.path, r.body, asOther...)
			gone := code == http.StatusNotFound && strings.Contains(string(body), `"NOT_FOUND"`) && strings.Contains(string(body), `no job \"`+st.ID)
			notFound(r.method+" "+r.path, !gone, string(body))
		}
		_, body = e.do(ctx, "GET", "/v1/jobs", "", asOther...)
		notFound("GET /v1/jobs", strings.Contains(string(body), st.ID), string(body))
		_, body = e.do(ctx, "GET", "/v1/sessions/t1", "", asOther...)
		notFound("GET /v1/sessions/t1", strings.Contains(string(body), st.ID), string(body))

		sessionless := tokenSession(t, e, "2026-07-28", other, nil)
		session := tokenSession(t, e, "2025-11-25", other, nil)
		for face, cs := range map[string]*mcp.ClientSession{"sessionless": sessionless, "a session": session} {
			for name, args := range jobTools(t, cs, st.ID) {
				if name == "job_kill" {
					continue
				}
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				text := toolText(r)
				notFound(face+" "+name, !(r.IsError && strings.HasPrefix(text, "NOT_FOUND: no job ")), text)
			}
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "corral://jobs/" + st.ID})
			notFound(face+" resources/read", err == nil, "")
			ids := listedJobs(t, cs)
			notFound(face+" resources/list", len(ids) > 0, strings.Join(ids, " "))
		}

		// The kill, last: a DELETE and job_kill by the other token. Then a
		// job of the other token's own ends, so its stream shows what it
		// carried before that.
		code, body = e.do(ctx, "DELETE", "/v1/jobs/"+st.ID, "", asOther...)
		notFound("DELETE", code != http.StatusNotFound, string(body))
		r, err := sessionless.CallTool(ctx, &mcp.CallToolParams{Name: "job_kill", Arguments: map[string]any{"id": st.ID}})
		if err != nil {
			t.Fatal(err)
		}
		if !shared {
			notFound("job_kill", !(r.IsError && strings.HasPrefix(toolText(r), "NOT_FOUND: no job ")), toolText(r))
			e.do(ctx, "DELETE", "/v1/jobs/"+st.ID, "") // its owner kills it
		}
		code, body = e.do(ctx, "POST", "/v1/jobs", `{"command":"exit 5"}`, asOther...)
		if code != http.StatusOK {
			t.Fatalf("other start: %d %s", code, body)
		}
		var own supervisor.JobStarted
		json.Unmarshal(body, &own)
		sawTheirs := false
		sc := bufio.NewScanner(events.Body)
		deadline := time.AfterFunc(30*time.Second, func() { events.Body.Close() })
		for sc.Scan() {
			var ev supervisor.JobEvent
			json.Unmarshal(sc.Bytes(), &ev)
			if ev.JobID == st.ID {
				sawTheirs = true
			}
			if ev.JobID == own.ID && ev.Event == supervisor.JobEventExited {
				break
			}
		}
		deadline.Stop()
		if sc.Err() != nil {
			t.Fatalf("events: %v", sc.Err())
		}
		notFound("GET /v1/events", sawTheirs, "")
	}
}
