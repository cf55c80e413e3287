package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/supervisor"
)

// TestMCPDescriptionsStateTheConfiguredLimits: a supervisor configured
// away from the defaults is described as configured, in the tool
// descriptions and in the bash input schema.
func TestMCPDescriptionsStateTheConfiguredLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *api.Config, c *supervisor.Config) {
		c.MaxTimeout = 600 * time.Second
		c.Budget = budget.Limits{MaxBytes: 10 << 10, MaxLines: 100}
		c.SpillMaxBytes = 2 << 20
		c.MaxJobs = 5
		c.MaxJobLifetime = 2 * time.Hour
	})
	ctx := context.Background()
	cs := inMemoryMCP(t, e)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]string{}
	for _, tool := range tools.Tools {
		schema, _ := json.Marshal(tool.InputSchema)
		text[tool.Name] = tool.Description + "\n" + string(schema)
	}
	wants := map[string][]string{
		api.ToolBash: {"1–600 allowed", "10 KiB and 100 lines", "up to 2048 KiB", "1 s to 2 h",
			"1 to 600 allowed", "1 to 7200 (2 h) allowed"},
		api.ToolJobList:    {"At most 5 jobs"},
		api.ToolJobWait:    {"at most 600"},
		api.ToolJobOutput:  {"10 KiB / 100 lines"},
		api.ToolReadOutput: {"2048 KiB here"},
	}
	for name, ws := range wants {
		for _, w := range ws {
			if !strings.Contains(text[name], w) {
				t.Errorf("%s lacks %q:\n%s", name, w, text[name])
			}
		}
	}
	for name, s := range text {
		for _, stale := range []string{"1–300", "1 to 300", "96 KiB", "4,000 lines", "24 h", "32 jobs"} {
			if strings.Contains(s, stale) {
				t.Errorf("%s states the default %q, not the configured limit", name, stale)
			}
		}
	}
}
