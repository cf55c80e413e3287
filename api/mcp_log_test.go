package api_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMCPLogNamesTheTool: each tool call logs a line naming the tool, and
// not its arguments.
func TestMCPLogNamesTheTool(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := zerolog.New(&buf)
	e := newEnv(t, func(c *api.Config, _ *supervisor.Config) { c.Logger = &logger })
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.srv.ServeMCP(ctx, st) }()
	defer func() { cancel(); <-served }()
	cs, err := newMCPClient().Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const arg = "echo arg-secret-61f0"
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolBash, Arguments: map[string]any{"command": arg}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: api.ToolJobList}); err != nil {
		t.Fatal(err)
	}
	log := buf.String()
	for _, want := range []string{`"tool":"bash","error":false`, `"tool":"job_list"`, `"message":"mcp tool call"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "arg-secret-61f0") {
		t.Errorf("the log holds the call's arguments:\n%s", log)
	}
}
