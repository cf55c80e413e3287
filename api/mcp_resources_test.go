package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// tokenSession connects a go-sdk client to the env's /mcp at version with
// token (none when ""), its notifications going to opts.
func tokenSession(t *testing.T, e *env, version, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: e.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token, tr}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestJobResources: a job is the resource corral://jobs/{id}: its owner
// reads it and subscribes to it, and gets notifications/resources/updated
// when it starts waiting for input (the resource then shows the wait) and
// when it exits, with a one-line logging notification of each; another
// session cannot read it or subscribe to it.
func TestJobResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	updated := make(chan string, 4)
	logged := make(chan string, 4)
	cs := tokenSession(t, e, "2025-11-25", "", &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			s, _ := r.Params.Data.(string)
			logged <- s
		},
	})
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	// The job reads its line only once the test subscribed (go exists),
	// so the wait cannot come before the subscription.
	goFile := filepath.Join(t.TempDir(), "go")
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{
		"command": "until [ -e " + goFile + " ]; do sleep 0.02; done; read x; exit 4", "background": true, "interactive": true}})
	if err != nil || r.IsError {
		t.Fatalf("%v %s", err, toolText(r))
	}
	var st supervisor.JobStarted
	structured(t, r, &st)
	uri := "corral://jobs/" + st.ID
	info := readJob(t, cs, uri)
	if info.State != supervisor.JobRunning || info.Waiting != nil {
		t.Fatalf("read before the wait: %+v", info)
	}
	other := httpClientSession(t, e, "2025-11-25")
	if _, err := other.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
		t.Errorf("another session read %s", uri)
	}
	if err := other.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err == nil {
		t.Errorf("another session subscribed to %s", uri)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// The wait: an update, after which the resource shows it, and its log.
	nextUpdate(t, updated, uri, "the wait")
	if info := readJob(t, cs, uri); info.Waiting == nil || info.State != supervisor.JobRunning {
		t.Errorf("after the wait's update: %+v, want running and waiting", info)
	}
	if got := nextLog(t, logged, "the wait"); !strings.Contains(got, "job "+st.ID+" waiting for input") {
		t.Errorf("log %q, want the wait", got)
	}

	// The exit: an update, the resource exited, and its log.
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolJobInput, Arguments: map[string]any{"id": st.ID, "data": "go\n"}}); err != nil || r.IsError {
		t.Fatalf("input: %v", err)
	}
	nextUpdate(t, updated, uri, "the exit")
	if got := nextLog(t, logged, "the exit"); !strings.Contains(got, "job "+st.ID+" exited: exit code 4") {
		t.Errorf("log %q", got)
	}
	if info := readJob(t, cs, uri); info.State != supervisor.JobExited {
		t.Errorf("after the exit: %+v", info)
	}
}

func readJob(t *testing.T, cs *mcp.ClientSession, uri string) supervisor.JobInfo {
	t.Helper()
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("read %s: %v %+v", uri, err, rr)
	}
	var info supervisor.JobInfo
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &info); err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	return info
}

func nextUpdate(t *testing.T, updated chan string, uri, what string) {
	t.Helper()
	select {
	case got := <-updated:
		if got != uri {
			t.Errorf("updated %q at %s, want %q", got, what, uri)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no resources/updated at %s", what)
	}
}

func nextLog(t *testing.T, logged chan string, what string) string {
	t.Helper()
	select {
	case got := <-logged:
		return got
	case <-time.After(30 * time.Second):
		t.Fatalf("no logging notification at %s", what)
	}
	return ""
}

// TestJobResourceList: resources/list lists the caller's jobs, and only
// them, on every face: an MCP session lists its own and not another
// session's; a sessionless call lists its token's and not another token's;
// --shared-jobs lists every job.
func TestJobResourceList(t *testing.T) {
	t.Parallel()
	const other = "other-token"
	e := newEnv(t, withTokens(testToken, other))
	ctx := context.Background()
	a := tokenSession(t, e, "2025-11-25", testToken, nil)
	b := tokenSession(t, e, "2025-11-25", testToken, nil)
	mine := tokenSession(t, e, "2026-07-28", testToken, nil)
	theirs := tokenSession(t, e, "2026-07-28", other, nil)

	r, err := a.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{"command": "sleep 30", "background": true}})
	if err != nil || r.IsError {
		t.Fatalf("%v %s", err, toolText(r))
	}
	var inA supervisor.JobStarted
	structured(t, r, &inA)
	code, body := e.do(ctx, "POST", "/v1/jobs", `{"command":"sleep 30"}`)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	var byToken supervisor.JobStarted
	json.Unmarshal(body, &byToken)
	t.Cleanup(func() {
		a.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolJobKill, Arguments: map[string]any{"id": inA.ID}})
		e.do(ctx, "DELETE", "/v1/jobs/"+byToken.ID, "")
	})

	for _, c := range []struct {
		name string
		cs   *mcp.ClientSession
		want []string
	}{
		{"the session that started it", a, []string{inA.ID}},
		{"another session", b, nil},
		{"sessionless with the token that started it", mine, []string{byToken.ID}},
		{"sessionless with another token", theirs, nil},
	} {
		if got := listedJobs(t, c.cs); !slices.Equal(got, c.want) {
			t.Errorf("%s lists %v, want %v", c.name, got, c.want)
		}
	}

	shared := newEnv(t, withSharedJobs())
	sa, sb := tokenSession(t, shared, "2025-11-25", "", nil), tokenSession(t, shared, "2025-11-25", "", nil)
	r, err = sa.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{"command": "sleep 30", "background": true}})
	if err != nil || r.IsError {
		t.Fatalf("%v %s", err, toolText(r))
	}
	var st supervisor.JobStarted
	structured(t, r, &st)
	if got := listedJobs(t, sb); !slices.Equal(got, []string{st.ID}) {
		t.Errorf("with shared jobs another session lists %v, want %s", got, st.ID)
	}
	sa.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolJobKill, Arguments: map[string]any{"id": st.ID}})
}

// listedJobs returns the job IDs of a resources/list, checking each entry.
func listedJobs(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res.Resources {
		id, ok := strings.CutPrefix(r.URI, "corral://jobs/")
		if !ok || r.Name != id || r.MIMEType != "application/json" || !strings.HasPrefix(r.Description, "background job, ") {
			t.Errorf("listed %+v", r)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestJobResourceFaces: the faces that can deliver notifications (stdio,
// /mcp with a session) advertise resource subscriptions and logging; the
// sessionless face (2026-07-28) advertises neither, and refuses
// resources/subscribe (the protocol itself has no logging/setLevel); none
// advertises listChanged, which corral never sends.
func TestJobResourceFaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := e.srv.MCPServer().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	stdio, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.Close()
	for _, c := range []struct {
		face      string
		cs        *mcp.ClientSession
		subscribe bool
	}{
		{"stdio", stdio, true},
		{"HTTP with a session", tokenSession(t, e, "2025-11-25", "", nil), true},
		{"HTTP without a session", tokenSession(t, e, "2026-07-28", "", nil), false},
	} {
		caps := c.cs.InitializeResult().Capabilities
		if caps.Resources == nil || caps.Resources.Subscribe != c.subscribe || caps.Resources.ListChanged {
			t.Errorf("%s: resources capability %+v, want subscribe %v and no listChanged", c.face, caps.Resources, c.subscribe)
		}
		if (caps.Logging != nil) != c.subscribe {
			t.Errorf("%s: logging capability %+v, want it offered: %v", c.face, caps.Logging, c.subscribe)
		}
	}
	// A plain POST without a session, as curl sends it.
	code, body := e.do(ctx, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"corral://jobs/j-0"}}`,
		"Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if code != http.StatusOK || !strings.Contains(string(body), `"error"`) || !strings.Contains(string(body), `"code":-32601`) {
		t.Errorf("sessionless resources/subscribe: %d %s, want method not found (-32601)", code, body)
	}
}
