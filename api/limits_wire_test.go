package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/supervisor"
)

func withLimits(mem int64, cpus float64, pids int) option {
	return func(_ *api.Config, c *supervisor.Config) {
		c.Containment.MemoryMax, c.Containment.CPUs, c.Containment.PidsMax = mem, cpus, pids
	}
}

// TestLimitsWire: a request's limits are decoded strictly, checked (an
// explicit zero, a negative, an absurd value or one over the server's is
// INVALID_ARGUMENT naming the field, and nothing starts), and every Result
// and job listing carries usage.
func TestLimitsWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLimits(1<<30, 1, 1000))
	for _, tc := range []struct{ body, field string }{
		{`{"command":"echo started","limits":{"memoryBytes":0}}`, "limits.memoryBytes"},
		{`{"command":"echo started","limits":{"memoryBytes":-5}}`, "limits.memoryBytes"},
		{`{"command":"echo started","limits":{"memoryBytes":1}}`, "limits.memoryBytes"},
		{`{"command":"echo started","limits":{"memoryBytes":2147483648}}`, "limits.memoryBytes"},
		{`{"command":"echo started","limits":{"cpus":0}}`, "limits.cpus"},
		{`{"command":"echo started","limits":{"cpus":10000}}`, "limits.cpus"},
		{`{"command":"echo started","limits":{"cpus":1.5}}`, "limits.cpus"},
		{`{"command":"echo started","limits":{"pids":0}}`, "limits.pids"},
		{`{"command":"echo started","limits":{"pids":1001}}`, "limits.pids"},
		{`{"command":"echo started","limits":{"pids":1}}`, "limits.pids must be at least 2"},
		{`{"command":"echo started","limits":{"pids":99999999999}}`, "limits.pids"},
		{`{"command":"echo started","limits":{"memory":5}}`, "memory"},
	} {
		code, b := e.do(context.Background(), "POST", "/v1/exec", tc.body)
		d := errorBody(t, b)
		if code != http.StatusBadRequest || d.Code != "INVALID_ARGUMENT" || !strings.Contains(d.Message, tc.field) {
			t.Errorf("%s: %d %+v, want INVALID_ARGUMENT naming %s", tc.body, code, d, tc.field)
		}
		code, b = e.do(context.Background(), "POST", "/v1/jobs", tc.body)
		if d := errorBody(t, b); code != http.StatusBadRequest || !strings.Contains(d.Message, tc.field) {
			t.Errorf("job %s: %d %+v", tc.body, code, d)
		}
	}
	if n := e.sup.Stats().Started; n != 0 {
		t.Errorf("%d commands started, want none", n)
	}
	res := e.exec(`{"command":"echo ok","limits":{"memoryBytes":268435456,"cpus":0.5,"pids":100}}`)
	if res.Stdout != "ok\n" || res.Usage == nil {
		t.Fatalf("Result %+v, want ok and a usage", res)
	}
	if e.sup.Bounds().Tier == killtree.TierPgroup && strings.Join(res.LimitsNotEnforced, ",") != "cpus,pids" {
		t.Errorf("pgroup: limitsNotEnforced %v", res.LimitsNotEnforced)
	}
	id := e.startJob(`{"command":"sleep 30","limits":{"pids":50}}`).ID
	defer e.kill(id)
	code, b := e.do(context.Background(), "GET", "/v1/jobs", "")
	var list struct {
		Jobs []map[string]json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(b, &list); code != http.StatusOK || err != nil || len(list.Jobs) != 1 {
		t.Fatalf("GET /v1/jobs: %d %s", code, b)
	}
	var u supervisor.Usage
	if err := json.Unmarshal(list.Jobs[0]["usage"], &u); err != nil {
		t.Errorf("job listing usage %s: %v", list.Jobs[0]["usage"], err)
	}
}

// TestLimitsMCP: the MCP bash tool takes the same limits, refused the same
// way.
func TestLimitsMCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLimits(1<<30, 1, 1000))
	cs := inMemoryMCP(t, e)
	r := callRaw(t, cs, "bash", `{"command":"echo started","limits":{"cpus":5000}}`)
	if !r.IsError || !strings.Contains(toolText(r), "limits.cpus") {
		t.Errorf("cpus 5000: %+v, want a tool error naming limits.cpus", toolText(r))
	}
	r = callRaw(t, cs, "bash", `{"command":"echo ok","limits":{"memoryBytes":268435456,"pids":50}}`)
	if r.IsError || !strings.Contains(toolText(r), "ok") {
		t.Errorf("within the limits: %q", toolText(r))
	}
	if n := e.sup.Stats().Started; n != 1 {
		t.Errorf("%d commands started, want 1", n)
	}
}
