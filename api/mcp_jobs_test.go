package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// structured decodes a tool result's structured content into v, failing
// the test on a tool error.
func structured(t *testing.T, r *mcp.CallToolResult, v any) {
	t.Helper()
	if r.IsError {
		t.Fatalf("tool error: %s", toolText(r))
	}
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func TestMCPJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := newMCPClient().Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: e.ts.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args any) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	_, marker := proctest.Marker(t)

	// The descriptions state the lifetimes and limits.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	desc := map[string]string{}
	for _, tool := range tools.Tools {
		desc[tool.Name] = tool.Description
	}
	wants := map[string][]string{
		api.ToolBash: {"background: true", "job_output", "job_wait", "30 min by default", "1 s to 24 h", "whole process tree",
			"session: \"name\"", "yield: N"},
		api.ToolJobOutput: {"after", "since your previous read", "96 KiB / 4,000 lines", "up to 30 s", "skippedBytes", "expired"},
		api.ToolJobInput:  {"interactive: true", "close: true", "INVALID_ARGUMENT", "yield: N"},
		api.ToolJobKill:   {"whole process tree"},
		api.ToolJobList:   {"running or exited", "10 min", "At most 32 jobs"},
	}
	// Each limit is stated once, in one description.
	for _, once := range []string{"At most 32 jobs", "stays readable for 10 min", "1 s to 24 h"} {
		n := 0
		for _, d := range desc {
			n += strings.Count(d, once)
		}
		if n != 1 {
			t.Errorf("%q is stated %d times across the tool descriptions, want once", once, n)
		}
	}
	for name, ws := range wants {
		for _, w := range ws {
			if !strings.Contains(desc[name], w) {
				t.Errorf("%s description lacks %q:\n%s", name, w, desc[name])
			}
		}
	}

	// bash background: the ID, the PID and how to read it; job_output until
	// the job exited sees every line once.
	r := call(api.ToolBash, map[string]any{"command": marked(marker, "for i in 1 2 3 4 5; do echo l$i; sleep 0.1; done"), "background": true})
	var st supervisor.JobStarted
	structured(t, r, &st)
	if st.ID == "" || st.Pid <= 0 || !strings.Contains(toolText(r), `job_output {"id": "`+st.ID+`"}`) {
		t.Fatalf("bash background: %+v %q", st, toolText(r))
	}
	var got strings.Builder
	after := int64(0)
	for {
		var out supervisor.JobOutput
		r := call(api.ToolJobOutput, map[string]any{"id": st.ID, "after": after, "wait": 10})
		structured(t, r, &out)
		if !strings.Contains(toolText(r), fmt.Sprint(out.Next)) {
			t.Errorf("job_output text lacks the cursor %d: %q", out.Next, toolText(r))
		}
		got.WriteString(out.Data)
		after = out.Next
		if out.State == supervisor.JobExited && out.Data == "" {
			if !strings.Contains(toolText(r), "exit code 0") || !strings.Contains(toolText(r), "end of stdout") {
				t.Errorf("final job_output text %q", toolText(r))
			}
			break
		}
	}
	if got.String() != "l1\nl2\nl3\nl4\nl5\n" {
		t.Errorf("read %q", got.String())
	}

	// job_input to an interactive job, then job_list and job_kill.
	r = call(api.ToolBash, map[string]any{"command": marked(marker, "read name; echo hello $name; setsid sleep 600 & sleep 600"),
		"background": true, "interactive": true, "lifetime": 120})
	structured(t, r, &st)
	var in api.JobInputResult
	structured(t, call(api.ToolJobInput, map[string]any{"id": st.ID, "data": "mcp\n", "close": true}), &in)
	if in != (api.JobInputResult{ID: st.ID, Written: 4, Closed: true}) {
		t.Errorf("job_input %+v", in)
	}
	var out supervisor.JobOutput
	structured(t, call(api.ToolJobOutput, map[string]any{"id": st.ID, "wait": 10}), &out)
	if out.Data != "hello mcp\n" || out.State != supervisor.JobRunning {
		t.Errorf("answer %+v", out)
	}
	var list api.JobList
	structured(t, call(api.ToolJobList, map[string]any{}), &list)
	states := map[string]string{}
	for _, j := range list.Jobs {
		states[j.ID] = j.State
	}
	if len(list.Jobs) != 2 || states[st.ID] != supervisor.JobRunning {
		t.Errorf("job_list %+v", list.Jobs)
	}
	waitFor(t, 30*time.Second, func() bool { return len(proctest.Survivors(marker)) >= 2 })
	var res supervisor.Result
	r = call(api.ToolJobKill, map[string]any{"id": st.ID})
	structured(t, r, &res)
	if res.ExitCode != nil || res.Kill.Processes < 2 || !strings.Contains(toolText(r), "background job was killed") {
		t.Errorf("job_kill %+v %q", res, toolText(r))
	}
	proctest.NoSurvivors(t, marker, 0)

	// Refusals are tool errors that name the code.
	refusals := []struct {
		name, tool string
		args       map[string]any
		code       string
	}{
		{"unknown job output", api.ToolJobOutput, map[string]any{"id": "j-nope"}, api.CodeNotFound},                              // never existed
		{"unknown job kill", api.ToolJobKill, map[string]any{"id": "j-nope"}, api.CodeNotFound},                                  //
		{"input to a killed job", api.ToolJobInput, map[string]any{"id": st.ID, "data": "x"}, api.CodeInvalidArgument},           // exited
		{"wait too long", api.ToolJobOutput, map[string]any{"id": st.ID, "wait": 31}, api.CodeInvalidArgument},                   // over 30 s
		{"bad stream", api.ToolJobOutput, map[string]any{"id": st.ID, "stream": "stdall"}, api.CodeInvalidArgument},              // stdout, stderr or both
		{"lifetime without background", api.ToolBash, map[string]any{"command": "true", "lifetime": 5}, api.CodeInvalidArgument}, // a plain command
		{"lifetime too long", api.ToolBash, map[string]any{"command": "true", "background": true, "lifetime": 86401}, api.CodeInvalidArgument},
	}
	for _, tt := range refusals {
		r := call(tt.tool, tt.args)
		if !r.IsError || !strings.HasPrefix(toolText(r), tt.code) {
			t.Errorf("%s: error %v, text %q, want %s", tt.name, r.IsError, toolText(r), tt.code)
		}
	}
}

// BenchmarkJobOutputLatencyHTTP measures the time from a job writing a line
// to a long-polling GET /v1/jobs/{id}/output reader receiving it, over 1,000
// lines 1 ms apart per iteration, and reports p50 and p99 in microseconds.
// The library-level baseline is supervisor's BenchmarkJobOutputLatency.
func BenchmarkJobOutputLatencyHTTP(b *testing.B) {
	sup, err := supervisor.New(supervisor.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	srv, err := api.New(api.Config{Supervisor: sup})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	post := func(path, body string) []byte {
		resp, err := client.Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		json.NewDecoder(resp.Body).Decode(&raw)
		return raw
	}
	var lat []float64
	for range b.N {
		var st supervisor.JobStarted
		json.Unmarshal(post("/v1/jobs", `{"command":`+jsonString(proctest.Command("wallines", "1000", "1"))+`}`), &st)
		after := int64(0)
		for {
			resp, err := client.Get(fmt.Sprintf("%s/v1/jobs/%s/output?after=%d&wait=10", ts.URL, st.ID, after))
			if err != nil {
				b.Fatal(err)
			}
			var out supervisor.JobOutput
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			now := time.Now().UnixNano()
			if err != nil {
				b.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSuffix(out.Data, "\n"), "\n") {
				if ns, err := strconv.ParseInt(line, 10, 64); err == nil {
					lat = append(lat, float64(now-ns)/1e3)
				}
			}
			after = out.Next
			if out.State == supervisor.JobExited && out.Data == "" {
				break
			}
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		b.Fatal("no lines read")
	}
	b.ReportMetric(lat[len(lat)/2], "p50-µs")
	b.ReportMetric(lat[len(lat)*99/100], "p99-µs")
	b.ReportMetric(float64(len(lat))/float64(b.N), "lines/op")
}
