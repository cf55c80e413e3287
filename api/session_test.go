package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

func TestExecSessionStateHTTP(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	res := e.exec(`{"session": "h1", "command": "cd ` + dir + ` && export A=1 B='two words' C=$'line\\nbreak'"}`)
	if res.Cwd == "" || !strings.HasSuffix(res.Cwd, dir[strings.LastIndex(dir, "/"):]) {
		t.Fatalf("cwd %q after cd %s", res.Cwd, dir)
	}
	res = e.exec(`{"session": "h1", "command": "pwd; printf '%s|%s|%s' \"$A\" \"$B\" \"$C\""}`)
	if want := res.Cwd + "\n1|two words|line\nbreak"; res.Stdout != want {
		t.Errorf("second command printed %q, want %q", res.Stdout, want)
	}
	res = e.exec(`{"session": "h1", "resetSession": true, "command": "printf '%s' \"${A-unset}\""}`)
	if res.Stdout != "unset" {
		t.Errorf("after resetSession: %q", res.Stdout)
	}
	// DELETE /v1/sessions/{id} forgets the state with the spills.
	e.exec(`{"session": "h1", "command": "export A=again"}`)
	if code, b := e.do(context.Background(), "DELETE", "/v1/sessions/h1", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, b)
	}
	if res := e.exec(`{"session": "h1", "command": "printf '%s' \"${A-unset}\""}`); res.Stdout != "unset" {
		t.Errorf("after DELETE /v1/sessions/h1: %q", res.Stdout)
	}
	// No session: stateless, and no cwd in the Result.
	code, b := e.do(context.Background(), "POST", "/v1/exec", `{"command": "cd /"}`)
	if code != http.StatusOK || strings.Contains(string(b), `"cwd"`) {
		t.Errorf("a stateless Result: %d %s", code, b)
	}
}

func TestExecYieldHTTP(t *testing.T) {
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	begin := time.Now()
	res := e.exec(`{"yield": 1, "command": ` + jsonString(marked(marker, "for i in $(seq 1 30); do echo $i; sleep 0.1; done")) + `}`)
	if !res.Running || res.JobID == "" || time.Since(begin) > 3*time.Second {
		t.Fatalf("yield 1: running %v job %q after %v", res.Running, res.JobID, time.Since(begin))
	}
	// Cursorless reads: no after, every byte once, ending where the job ends.
	var got strings.Builder
	got.WriteString(res.Stdout)
	for {
		code, b := e.do(context.Background(), "GET", "/v1/jobs/"+res.JobID+"/output?wait=5", "")
		var out supervisor.JobOutput
		if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil {
			t.Fatalf("cursorless read: %d %s", code, b)
		}
		got.WriteString(out.Data)
		if out.State == supervisor.JobExited && out.Data == "" {
			break
		}
	}
	var want strings.Builder
	for i := 1; i <= 30; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if got.String() != want.String() {
		t.Errorf("yield view plus cursorless reads = %q, want %q", got.String(), want.String())
	}
	// A yield past the timeout is refused and starts nothing.
	code, b := e.do(context.Background(), "POST", "/v1/exec", `{"yield": 5, "timeout": 2, "command": "touch /nonexistent-dir/x"}`)
	if code != http.StatusBadRequest || errorCode(t, b) != "INVALID_ARGUMENT" {
		t.Errorf("yield past the timeout: %d %s", code, b)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}

func TestJobStdinYieldHTTP(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st := e.startJob(`{"interactive": true, "command": ` + jsonString(marked(marker, `python3 -c 'while True: print(input()[::-1])'`)) + `}`)
	for _, word := range []string{"hello", "corral", "abc", "stressed", "xyz"} {
		code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin?yield=20", word+"\n")
		var out supervisor.JobOutput
		if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil {
			t.Fatalf("stdin?yield: %d %s", code, b)
		}
		r := []rune(word)
		for i, k := 0, len(r)-1; i < k; i, k = i+1, k-1 {
			r[i], r[k] = r[k], r[i]
		}
		if out.Data != string(r)+"\n" {
			t.Errorf("sent %q, the same call returned %q", word, out.Data)
		}
	}
	// Without yield: 204 as before.
	if code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin", "x\n"); code != http.StatusNoContent {
		t.Errorf("stdin without yield: %d %s", code, b)
	}
	for _, q := range []string{"yield=0", "yield=31", "yield=x", "yield=1&stream=both"} {
		code, b := e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/stdin?"+q, "x\n")
		if code != http.StatusBadRequest || errorCode(t, b) != "INVALID_ARGUMENT" {
			t.Errorf("stdin?%s: %d %s", q, code, b)
		}
	}
}

// BenchmarkInteractiveRoundTrip is one turn of an interactive program over
// HTTP: POST /v1/jobs/{id}/stdin?yield=5 with one line to a Python program
// that prints it reversed, the answer in the same call. The call returns
// once the program blocks reading its input again (the kernel's word:
// docs/terminals.md), so a turn costs the program's own time plus corral's
// detection and overhead; only where the wait cannot be watched does it
// wait for the output to pause for supervisor.InputPause (100 ms).
func BenchmarkInteractiveRoundTrip(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 not found")
	}
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
		raw, _ := io.ReadAll(resp.Body)
		return raw
	}
	var st supervisor.JobStarted
	json.Unmarshal(post("/v1/jobs", `{"interactive":true,"command":"python3 -c 'while True: print(input()[::-1])'"}`), &st)
	// The first answer waits for Python to start; it is not a turn.
	if raw := post("/v1/jobs/"+st.ID+"/stdin?yield=30", "warm\n"); !strings.Contains(string(raw), "mraw") {
		b.Fatalf("warm-up answer %s", raw)
	}
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		var out supervisor.JobOutput
		if err := json.Unmarshal(post("/v1/jobs/"+st.ID+"/stdin?yield=5", "corral\n"), &out); err != nil || out.Data != "larroc\n" {
			b.Fatalf("answer %q: %v", out.Data, err)
		}
		lat = append(lat, time.Since(start))
	}
	sup.Jobs().Kill(st.ID)
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}
