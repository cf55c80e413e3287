package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// TestJobResources: a job is the resource corral://jobs/{id}: its owner
// reads it and subscribes to it; it gets a one-line logging notification
// when the job waits for input, and notifications/resources/updated and a
// one-line logging notification when it exits; another session cannot
// read it.
func TestJobResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	updated := make(chan string, 4)
	logged := make(chan string, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "t"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			s, _ := r.Params.Data.(string)
			logged <- s
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.ts.URL + "/mcp", HTTPClient: e.ts.Client(), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{"command": "read x; exit 4", "background": true, "interactive": true}})
	if err != nil || r.IsError {
		t.Fatalf("%v %s", err, toolText(r))
	}
	var st supervisor.JobStarted
	structured(t, r, &st)
	uri := "corral://jobs/" + st.ID
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, `"state":"running"`) {
		t.Fatalf("read: %v %+v", err, rr)
	}
	other := httpClientSession(t, e, "2025-11-25")
	if _, err := other.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
		t.Errorf("another session read %s", uri)
	}
	// The job waits for its line first; that wait is logged to its owner
	// (subscribed or not). Subscribe only after it, so that the one update
	// the subscription brings is the exit's.
	select {
	case got := <-logged:
		if !strings.Contains(got, "job "+st.ID+" waiting for input") {
			t.Fatalf("log %q, want the wait", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no logging notification of the wait")
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolJobInput, Arguments: map[string]any{"id": st.ID, "data": "go\n"}}); err != nil || r.IsError {
		t.Fatalf("input: %v", err)
	}
	select {
	case got := <-updated:
		if got != uri {
			t.Errorf("updated %q, want %q", got, uri)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no resources/updated")
	}
	select {
	case got := <-logged:
		if !strings.Contains(got, "job "+st.ID+" exited: exit code 4") {
			t.Errorf("log %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no logging notification")
	}
	rr, _ = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	var info supervisor.JobInfo
	if json.Unmarshal([]byte(rr.Contents[0].Text), &info); info.State != supervisor.JobExited {
		t.Errorf("after the exit: %+v", info)
	}
}
