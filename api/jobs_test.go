package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

func init() {
	// wallines N MS: print N lines, each the wall-clock time (Unix ns) at
	// which it was written, MS milliseconds apart. The wall clock is
	// system-wide, so the reader can compare it with its own.
	proctest.Register("wallines", func(args []string) int {
		n, _ := strconv.Atoi(args[0])
		ms, _ := strconv.Atoi(args[1])
		for range n {
			fmt.Fprintf(os.Stdout, "%d\n", time.Now().UnixNano())
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		return 0
	})
}

func withJobs(retention time.Duration, capture int) option {
	return func(_ *api.Config, c *supervisor.Config) {
		c.JobRetention = retention
		c.Capture = supervisor.CaptureLimits{MaxBytes: capture}
	}
}

// startJob starts a job through POST /v1/jobs and fails the test unless it
// got 200 and an ID. The job is killed at the end of the test.
func (e *env) startJob(body string) supervisor.JobStarted {
	e.t.Helper()
	code, b := e.do(context.Background(), "POST", "/v1/jobs", body)
	var st supervisor.JobStarted
	if err := json.Unmarshal(b, &st); code != http.StatusOK || err != nil || st.ID == "" || st.Pid <= 0 {
		e.t.Fatalf("POST /v1/jobs %s: status %d: %s", body, code, b)
	}
	e.t.Cleanup(func() { e.do(context.Background(), "DELETE", "/v1/jobs/"+st.ID, "") })
	return st
}

// output reads one window through GET /v1/jobs/{id}/output.
func (e *env) output(id string, after int64, wait float64, stream string) supervisor.JobOutput {
	e.t.Helper()
	q := url.Values{"after": {fmt.Sprint(after)}, "wait": {fmt.Sprint(wait)}}
	if stream != "" {
		q.Set("stream", stream)
	}
	code, b := e.do(context.Background(), "GET", "/v1/jobs/"+id+"/output?"+q.Encode(), "")
	var out supervisor.JobOutput
	if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil {
		e.t.Fatalf("output of %s after %d: status %d: %s", id, after, code, b)
	}
	return out
}

// wait waits for the job through POST /v1/jobs/{id}/wait and returns its
// Result; it fails the test unless the status is 200.
func (e *env) wait(id string) supervisor.Result {
	e.t.Helper()
	code, b := e.do(context.Background(), "POST", "/v1/jobs/"+id+"/wait?timeout=60", "")
	var res supervisor.Result
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil {
		e.t.Fatalf("wait %s: status %d: %s", id, code, b)
	}
	return res
}

// readUntil reads stdout with long polls until the text read contains want
// or the job exited, and returns the text and the next cursor.
func (e *env) readUntil(id string, after int64, want string) (string, int64) {
	e.t.Helper()
	var got strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(got.String(), want) {
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s: read %q, want %q", id, got.String(), want)
		}
		out := e.output(id, after, 5, "")
		got.WriteString(out.Data)
		after = out.Next
		if out.State == supervisor.JobExited && out.Data == "" {
			break
		}
	}
	return got.String(), after
}

// TestJobCursorHTTP: a job printing a line per 100 ms is read with the
// cursor; every line arrives exactly once and in order, no read skips, and
// every read that found the job running woke on new output well before its
// 20 s wait ended.
func TestJobCursorHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st := e.startJob(`{"command":` + jsonString(marked(marker, proctest.Command("wallines", "20", "100"))) + `}`)
	var lines []string
	after := int64(0)
	for {
		begin := time.Now()
		out := e.output(st.ID, after, 20, "stdout")
		took := time.Since(begin)
		if out.After != after || out.SkippedBytes != 0 || out.ID != st.ID || out.Stream != "stdout" {
			t.Fatalf("read after %d: %+v", after, out)
		}
		if out.State == supervisor.JobRunning && took > 10*time.Second {
			t.Errorf("a read took %v: it waited for its deadline, not for the output", took)
		}
		if out.Data != "" {
			lines = append(lines, strings.Split(strings.TrimSuffix(out.Data, "\n"), "\n")...)
		}
		after = out.Next
		if out.State == supervisor.JobExited {
			if out.Result == nil || out.Result.ExitCode == nil || *out.Result.ExitCode != 0 {
				t.Errorf("final read: result %+v", out.Result)
			}
			if out.Data == "" {
				break
			}
		}
	}
	if len(lines) != 20 {
		t.Fatalf("read %d lines, want 20: %q", len(lines), lines)
	}
	var stamps []int64
	for _, l := range lines {
		ns, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		stamps = append(stamps, ns)
	}
	if !slices.IsSorted(stamps) || len(slices.Compact(slices.Clone(stamps))) != 20 {
		t.Errorf("lines out of order or repeated: %v", stamps)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}

// TestJobLongPollWakesHTTP: a read waiting on an interactive job returns
// with the answer once stdin is written, long before its 25 s wait.
func TestJobLongPollWakesHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st := e.startJob(`{"command":` + jsonString(marked(marker, "read x; echo got $x; sleep 600")) + `,"interactive":true}`)
	type read struct {
		out  supervisor.JobOutput
		took time.Duration
	}
	ch := make(chan read, 1)
	go func() {
		begin := time.Now()
		q := "/v1/jobs/" + st.ID + "/output?after=0&wait=25"
		resp := e.send(context.Background(), "GET", q, "")
		defer resp.Body.Close()
		var out supervisor.JobOutput
		json.NewDecoder(resp.Body).Decode(&out)
		ch <- read{out, time.Since(begin)}
	}()
	// The reader is waiting (or about to); the write wakes it either way.
	if code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin", "ping\n"); code != http.StatusNoContent {
		t.Fatalf("stdin: %d %s", code, b)
	}
	r := <-ch
	if r.out.Data != "got ping\n" || r.out.State != supervisor.JobRunning || r.took > 15*time.Second {
		t.Errorf("long poll returned %+v after %v", r.out, r.took)
	}
	res := e.kill(st.ID)
	if res.ExitCode != nil || res.Signal == "" {
		t.Errorf("killed job result %+v", res)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}

// kill deletes a job and returns its Result.
func (e *env) kill(id string) supervisor.Result {
	e.t.Helper()
	code, b := e.do(context.Background(), "DELETE", "/v1/jobs/"+id, "")
	var res supervisor.Result
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil {
		e.t.Fatalf("DELETE %s: status %d: %s", id, code, b)
	}
	return res
}

// TestJobSkippedHTTP: with a 4 KiB capture ceiling, a reader that starts
// at 0 after 100,000 bytes were written is told what it missed, and reads
// the rest from there to the end.
func TestJobSkippedHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withJobs(0, 4096))
	st := e.startJob(`{"command":"head -c 100000 /dev/zero | tr '\\0' x"}`)
	e.wait(st.ID)
	out := e.output(st.ID, 0, 0, "stdout")
	if out.SkippedBytes < 100000-4096 || out.SkippedBytes >= 100000 {
		t.Errorf("skippedBytes %d, want about 100000-4096", out.SkippedBytes)
	}
	if got := out.SkippedBytes + int64(len(out.Data)); out.Next != got || out.Next != 100000 {
		t.Errorf("next %d, skipped %d + data %d", out.Next, out.SkippedBytes, len(out.Data))
	}
	if strings.Trim(out.Data, "x") != "" || out.State != supervisor.JobExited || out.Result == nil {
		t.Errorf("data %q state %s", out.Data, out.State)
	}
	end := e.output(st.ID, out.Next, 0, "stdout")
	if end.Data != "" || end.SkippedBytes != 0 || end.Next != 100000 {
		t.Errorf("read at the end: %+v", end)
	}
}

// TestJobInteractiveHTTP: stdin written, answer read, stdin closed, job
// ends with exit code 0; then stdin is refused.
func TestJobInteractiveHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, command, input, want string
	}{
		{"cat", "cat", "hello\n", "hello\n"},                                     // echoes until EOF
		{"read", "read name; echo hello $name; cat", "world\n", "hello world\n"}, // answers, then waits for EOF
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, marker := proctest.Marker(t)
			st := e.startJob(`{"command":` + jsonString(marked(marker, tt.command)) + `,"interactive":true}`)
			if code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin", tt.input); code != http.StatusNoContent {
				t.Fatalf("stdin: %d %s", code, b)
			}
			got, _ := e.readUntil(st.ID, 0, tt.want)
			if got != tt.want {
				t.Errorf("read %q, want %q", got, tt.want)
			}
			if code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin?close=true", ""); code != http.StatusNoContent {
				t.Fatalf("close stdin: %d %s", code, b)
			}
			res := e.wait(st.ID)
			if res.ExitCode == nil || *res.ExitCode != 0 {
				t.Errorf("result %+v", res)
			}
			code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin", "more\n")
			if code != http.StatusBadRequest || errorCode(t, b) != api.CodeInvalidArgument || !strings.Contains(string(b), "exited") {
				t.Errorf("stdin after the end: %d %s", code, b)
			}
			proctest.NoSurvivors(t, marker, time.Second)
		})
	}
}

// TestJobLifetimeHTTP: a job is killed at the end of its lifetime with
// its whole tree, the setsid child included. The two processes the kill
// count relies on each write a readiness file when they run, and the test
// waits for both before it waits for the end: the count then cannot depend
// on how fast a loaded machine started them. The lifetime leaves them 5 s
// to start.
func TestJobLifetimeHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	dir := t.TempDir()
	ready := func(name string) string { return filepath.Join(dir, name) }
	command := fmt.Sprintf(`setsid sh -c 'echo > %s; exec sleep 600' & sh -c 'echo > %s; exec sleep 600'`,
		ready("setsid"), ready("child"))
	st := e.startJob(`{"command":` + jsonString(marked(marker, command)) + `,"lifetime":5}`)
	waitFor(t, 30*time.Second, func() bool {
		_, err1 := os.Stat(ready("setsid"))
		_, err2 := os.Stat(ready("child"))
		if err1 != nil || err2 != nil {
			for _, j := range e.sup.Jobs().List() {
				if j.ID == st.ID && j.State != supervisor.JobRunning {
					t.Fatalf("the job ended before both processes started (setsid %v, child %v)", err1, err2)
				}
			}
			return false
		}
		return true
	})
	res := e.wait(st.ID)
	if !res.TimedOut || res.ExitCode != nil || res.Kill.Processes < 2 || !strings.Contains(res.Stderr, "lifetime of 5s") {
		t.Errorf("result %+v", res)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}

// TestJobRetentionHTTP: an exited job is listed and readable, then gone
// (404) once its retention passed.
func TestJobRetentionHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withJobs(300*time.Millisecond, 0))
	st := e.startJob(`{"command":"echo done"}`)
	e.wait(st.ID)
	code, b := e.do(context.Background(), "GET", "/v1/jobs", "")
	var list api.JobList
	if err := json.Unmarshal(b, &list); code != 200 || err != nil || len(list.Jobs) != 1 {
		t.Fatalf("list: %d %s", code, b)
	}
	j := list.Jobs[0]
	want := supervisor.JobInfo{ID: st.ID, Command: "echo done", State: supervisor.JobExited, Pid: st.Pid,
		StartedAt: j.StartedAt, StdoutBytes: 5, Usage: j.Usage}
	if diff := cmp.Diff(want, j); diff != "" || j.StartedAt.IsZero() || j.Usage == nil {
		t.Errorf("listed job (-want +got):\n%s", diff)
	}
	waitFor(t, 30*time.Second, func() bool {
		code, _ := e.do(context.Background(), "GET", "/v1/jobs/"+st.ID+"/output", "")
		return code == http.StatusNotFound
	})
	code, b = e.do(context.Background(), "GET", "/v1/jobs", "")
	if code != 200 || string(b) != "{\"jobs\":[]}\n" {
		t.Errorf("list after the retention: %d %s", code, b)
	}
}

// TestJobLimitHTTP: 32 live jobs are allowed, the 33rd is refused with 429
// RESOURCE_EXHAUSTED; once one is killed a new one starts. Killing a job
// kills its tree.
func TestJobLimitHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	body := `{"command":` + jsonString(marked(marker, "sleep 600 & sleep 600")) + `}`
	var ids []string
	for range supervisor.DefaultMaxJobs {
		ids = append(ids, e.startJob(body).ID)
	}
	code, b := e.do(context.Background(), "POST", "/v1/jobs", body)
	if code != http.StatusTooManyRequests || errorCode(t, b) != api.CodeResourceExhausted {
		t.Errorf("33rd job: %d %s", code, b)
	}
	res := e.kill(ids[0])
	if res.ExitCode != nil || res.Kill.Processes < 2 {
		t.Errorf("killed job: %+v", res)
	}
	// The library publishes the killed job's Result a moment before it
	// frees the job's slot, so the next start may still be refused briefly.
	waitFor(t, 5*time.Second, func() bool {
		code, b := e.do(context.Background(), "POST", "/v1/jobs", body)
		var st supervisor.JobStarted
		if code == http.StatusOK && json.Unmarshal(b, &st) == nil {
			ids[0] = st.ID
			return true
		}
		return false
	})
	for _, id := range ids {
		e.kill(id)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}

// TestJobDeleteHTTP: DELETE kills the whole tree, the setsid child
// included, before it answers; a second DELETE returns the same Result.
func TestJobDeleteHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st := e.startJob(`{"command":` + jsonString(marked(marker, "setsid sleep 600 & sleep 600 & echo ready; wait")) + `}`)
	e.readUntil(st.ID, 0, "ready\n")
	// The two sleeps carry the marker (the shell's own environ predates the export).
	waitFor(t, 30*time.Second, func() bool { return len(proctest.Survivors(marker)) >= 2 })
	res := e.kill(st.ID)
	if res.ExitCode != nil || res.Signal == "" || res.Kill.Processes < 2 || res.TimedOut {
		t.Errorf("result %+v", res)
	}
	proctest.NoSurvivors(t, marker, 0)
	if again := e.kill(st.ID); !cmp.Equal(again, res) {
		t.Errorf("second DELETE: %+v, first %+v", again, res)
	}
}

// TestJobShutdownHTTP: Shutdown kills every running job with its tree, and
// refuses new jobs afterwards.
func TestJobShutdownHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	body := `{"command":` + jsonString(marked(marker, "setsid sleep 600 & sleep 600")) + `}`
	var ids []string
	for range 3 {
		ids = append(ids, e.startJob(body).ID)
	}
	waitFor(t, 30*time.Second, func() bool { return len(proctest.Survivors(marker)) >= 6 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	proctest.NoSurvivors(t, marker, 0)
	for _, j := range e.sup.Jobs().List() {
		if j.State != supervisor.JobExited {
			t.Errorf("after Shutdown: %+v", j)
		}
	}
	code, b := e.do(context.Background(), "POST", "/v1/jobs", body)
	if code != http.StatusServiceUnavailable || errorCode(t, b) != api.CodeUnavailable {
		t.Errorf("a job after Shutdown: %d %s, want 503 UNAVAILABLE (docs/wire.md: shutting down)", code, b)
	}
}

// TestJobErrorsHTTP: every refusal has its status and code, and nothing runs.
func TestJobErrorsHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	running := e.startJob(`{"command":"sleep 600","interactive":true}`).ID
	plain := e.startJob(`{"command":"sleep 600"}`).ID
	closed := e.startJob(`{"command":"sleep 600","interactive":true}`).ID
	if code, b := e.do(ctx, "POST", "/v1/jobs/"+closed+"/stdin?close=1", ""); code != http.StatusNoContent {
		t.Fatalf("close: %d %s", code, b)
	}
	big := strings.Repeat("x", api.MaxBodyBytes+1)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown id output", "GET", "/v1/jobs/j-0000000000000000/output", "", 404, api.CodeNotFound},           // never existed
		{"unknown id stdin", "POST", "/v1/jobs/j-0000000000000000/stdin", "x", 404, api.CodeNotFound},           // same for each route
		{"unknown id wait", "POST", "/v1/jobs/j-0000000000000000/wait", "", 404, api.CodeNotFound},              //
		{"unknown id wait 0", "POST", "/v1/jobs/j-0000000000000000/wait?timeout=0", "", 404, api.CodeNotFound},  // the no-wait path
		{"unknown id delete", "DELETE", "/v1/jobs/nope", "", 404, api.CodeNotFound},                             //
		{"bad stream", "GET", "/v1/jobs/" + running + "/output?stream=stdin", "", 400, api.CodeInvalidArgument}, // stdout or stderr
		{"empty stream", "GET", "/v1/jobs/" + running + "/output?stream=", "", 400, api.CodeInvalidArgument},    // present but empty
		{"after not a number", "GET", "/v1/jobs/" + running + "/output?after=x", "", 400, api.CodeInvalidArgument},
		{"after negative", "GET", "/v1/jobs/" + running + "/output?after=-1", "", 400, api.CodeInvalidArgument},    // before the start
		{"after past the end", "GET", "/v1/jobs/" + running + "/output?after=5", "", 400, api.CodeInvalidArgument}, // nothing written yet
		{"wait too long", "GET", "/v1/jobs/" + running + "/output?wait=31", "", 400, api.CodeInvalidArgument},      // over 30 s
		{"wait negative", "GET", "/v1/jobs/" + running + "/output?wait=-1", "", 400, api.CodeInvalidArgument},      //
		{"wait NaN", "GET", "/v1/jobs/" + running + "/output?wait=NaN", "", 400, api.CodeInvalidArgument},          // not a duration
		{"wait not a number", "GET", "/v1/jobs/" + running + "/output?wait=soon", "", 400, api.CodeInvalidArgument},
		{"stdin not interactive", "POST", "/v1/jobs/" + plain + "/stdin", "x", 400, api.CodeInvalidArgument}, // reads /dev/null
		{"stdin closed", "POST", "/v1/jobs/" + closed + "/stdin", "x", 400, api.CodeInvalidArgument},         // closed above
		{"stdin bad close", "POST", "/v1/jobs/" + running + "/stdin?close=maybe", "", 400, api.CodeInvalidArgument},
		{"stdin too large", "POST", "/v1/jobs/" + running + "/stdin", big, 413, api.CodeResourceExhausted},        // over 1 MiB
		{"wait deadline", "POST", "/v1/jobs/" + running + "/wait?timeout=0.2", "", 408, api.CodeDeadlineExceeded}, // still running
		{"wait no time", "POST", "/v1/jobs/" + running + "/wait?timeout=0", "", 408, api.CodeDeadlineExceeded},    // checks only
		{"wait timeout too long", "POST", "/v1/jobs/" + running + "/wait?timeout=301", "", 400, api.CodeInvalidArgument},
		{"wait timeout bad", "POST", "/v1/jobs/" + running + "/wait?timeout=x", "", 400, api.CodeInvalidArgument},
		{"start empty body", "POST", "/v1/jobs", "", 400, api.CodeInvalidArgument},                                        // JSON required
		{"start unknown field", "POST", "/v1/jobs", `{"command":"true","background":true}`, 400, api.CodeInvalidArgument}, // not in the contract
		{"start no command", "POST", "/v1/jobs", `{"lifetime":5}`, 400, api.CodeInvalidArgument},                          // nothing to run
		{"lifetime zero", "POST", "/v1/jobs", `{"command":"true","lifetime":0}`, 400, api.CodeInvalidArgument},            // not "default"
		{"lifetime tiny", "POST", "/v1/jobs", `{"command":"true","lifetime":1e-12}`, 400, api.CodeInvalidArgument},        // rounds to 0
		{"lifetime half", "POST", "/v1/jobs", `{"command":"true","lifetime":0.5}`, 400, api.CodeInvalidArgument},          // below 1 s
		{"lifetime negative", "POST", "/v1/jobs", `{"command":"true","lifetime":-1}`, 400, api.CodeInvalidArgument},       //
		{"lifetime over 24 h", "POST", "/v1/jobs", `{"command":"true","lifetime":86401}`, 400, api.CodeInvalidArgument},   // the ceiling
		{"lifetime huge", "POST", "/v1/jobs", `{"command":"true","lifetime":1e300}`, 400, api.CodeInvalidArgument},        // no overflow
		{"lifetime string", "POST", "/v1/jobs", `{"command":"true","lifetime":"5"}`, 400, api.CodeInvalidArgument},        // wrong type
		{"interactive with stdin", "POST", "/v1/jobs", `{"command":"cat","interactive":true,"stdin":"x"}`, 400, api.CodeInvalidArgument},
		{"start too large", "POST", "/v1/jobs", `{"command":"` + big + `"}`, 413, api.CodeResourceExhausted}, // over 1 MiB
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, b := e.do(ctx, tt.method, tt.path, tt.body)
			if code != tt.status {
				t.Errorf("status %d, want %d: %s", code, tt.status, b)
			}
			if got := errorCode(t, b); got != tt.code {
				t.Errorf("code %s, want %s: %s", got, tt.code, b)
			}
		})
	}
	t.Run("no job started", func(t *testing.T) {
		// Only the three jobs of this test exist: no refused start ran.
		if n := len(e.sup.Jobs().List()); n != 3 {
			t.Errorf("%d jobs, want 3: %+v", n, e.sup.Jobs().List())
		}
	})
}

// TestJobAuthHTTP: every job route needs the token.
func TestJobAuthHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withToken(testToken))
	st := e.startJob(`{"command":"sleep 600","interactive":true}`)
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"command":"true"}`},
		{"GET", "/v1/jobs", ""},
		{"GET", "/v1/jobs/" + st.ID + "/output", ""},
		{"POST", "/v1/jobs/" + st.ID + "/stdin", "x"},
		{"POST", "/v1/jobs/" + st.ID + "/wait?timeout=0", ""},
		{"DELETE", "/v1/jobs/" + st.ID, ""},
	}
	for _, r := range routes {
		req, _ := http.NewRequest(r.method, e.ts.URL+r.path, strings.NewReader(r.body))
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || body.Error.Code != api.CodeUnauthenticated {
			t.Errorf("%s %s: %d %q, want 401 UNAUTHENTICATED", r.method, r.path, resp.StatusCode, body.Error.Code)
		}
	}
	// The job is untouched: still running, nothing written, listed once.
	if jobs := e.sup.Jobs().List(); len(jobs) != 1 || jobs[0].State != supervisor.JobRunning {
		t.Errorf("jobs %+v", jobs)
	}
	// A cross-origin browser request is refused too.
	code, b := e.do(context.Background(), "DELETE", "/v1/jobs/"+st.ID, "", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	if code != http.StatusForbidden || errorCode(t, b) != api.CodePermissionDenied {
		t.Errorf("cross-origin DELETE: %d %s", code, b)
	}
}

// TestJobEvictedHTTP: past the retained-jobs cap the oldest exited job is
// forgotten; every job route answers it 404 NOT_FOUND saying it expired
// and was evicted, and an ID that never existed says neither.
func TestJobEvictedHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *api.Config, c *supervisor.Config) { c.MaxRetainedJobs = 1 })
	first := e.startJob(`{"command":"echo one"}`)
	e.wait(first.ID)
	second := e.startJob(`{"command":"echo two"}`)
	e.wait(second.ID)
	routes := []struct{ method, path string }{
		{"GET", "/v1/jobs/%s/output"},
		{"POST", "/v1/jobs/%s/wait?timeout=0"},
		{"POST", "/v1/jobs/%s/wait?timeout=1"},
		{"DELETE", "/v1/jobs/%s"},
	}
	for _, r := range routes {
		code, b := e.do(context.Background(), r.method, fmt.Sprintf(r.path, first.ID), "")
		if code != http.StatusNotFound || errorCode(t, b) != api.CodeNotFound ||
			!strings.Contains(string(b), "expired: it exited and was evicted: at most 1 exited jobs are kept") {
			t.Errorf("%s %s of the evicted job: %d %s", r.method, r.path, code, b)
		}
		code, b = e.do(context.Background(), r.method, fmt.Sprintf(r.path, "j-0123456789abcdef"), "")
		if code != http.StatusNotFound || strings.Contains(string(b), "expired") {
			t.Errorf("%s %s of an unknown job: %d %s", r.method, r.path, code, b)
		}
	}
	if out := e.output(second.ID, 0, 0, ""); out.Data != "two\n" || out.Result == nil {
		t.Errorf("the retained job: %+v", out)
	}
}
