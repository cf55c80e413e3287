package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// TestAuth: every route but the public ones (GET /healthz, GET
// /openapi.json) answers 401 UNAUTHENTICATED to a request without the
// right token, GET /v1/events included.
func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withToken(testToken))
	ctx := context.Background()
	paths := []struct{ method, path, body string }{
		{"POST", "/v1/exec", `{"command":"true"}`},
		{"POST", "/v1/read", `{"path":"x"}`},
		{"POST", "/v1/grep", `{"path":"x","pattern":"x"}`},
		{"DELETE", "/v1/sessions/s1", ""},
		{"GET", "/metrics", ""},
		{"POST", "/mcp", `{}`},
		{"GET", "/v1/events", ""},
	}
	// And every operation of the OpenAPI document that is not public, its
	// path parameters filled in (TestOpenAPIRoutes ties the document to
	// the routes served).
	var doc struct {
		Paths map[string]map[string]struct {
			Security *[]any `json:"security"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	params := regexp.MustCompile(`\{[a-z]+\}`)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if op.Security != nil && len(*op.Security) == 0 {
				continue // served without the token
			}
			paths = append(paths, struct{ method, path, body string }{strings.ToUpper(method), params.ReplaceAllString(path, "x1"), ""})
		}
	}
	if len(paths) < 25 {
		t.Fatalf("only %d routes", len(paths))
	}
	tests := []struct {
		name   string
		header string // Authorization; "-" sends none
	}{
		{"no header", "-"},                                 // nothing at all
		{"wrong token", "Bearer wrong"},                    // same scheme, other secret
		{"token prefix", "Bearer " + testToken[:4]},        // a prefix is not the token
		{"token plus suffix", "Bearer " + testToken + "x"}, // nor is a longer value
		{"no scheme", testToken},                           // the bare token
		{"basic scheme", "Basic " + testToken},             // another scheme
	}
	for _, tt := range tests {
		for _, p := range paths {
			// A route that wrongly answers (a stream that never ends)
			// fails at the deadline instead of hanging the test.
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			req, _ := http.NewRequestWithContext(rctx, p.method, e.ts.URL+p.path, strings.NewReader(p.body))
			if tt.header != "-" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body api.ErrorBody
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			cancel()
			if resp.StatusCode != http.StatusUnauthorized || body.Error.Code != api.CodeUnauthenticated {
				t.Errorf("%s: %s %s: status %d code %q, want 401 UNAUTHENTICATED", tt.name, p.method, p.path, resp.StatusCode, body.Error.Code)
			}
		}
	}
	// /healthz needs no token; the right token opens the rest.
	req, _ := http.NewRequest("GET", e.ts.URL+"/healthz", nil)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz without token: %d", resp.StatusCode)
	}
	if res := e.exec(`{"command":"echo ok"}`); res.Stdout != "ok\n" {
		t.Errorf("with the token: stdout %q", res.Stdout)
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, b := e.do(context.Background(), "GET", "/healthz", "")
	var got api.Health
	if err := json.Unmarshal(b, &got); err != nil || code != 200 {
		t.Fatalf("status %d, %v: %s", code, err, b)
	}
	want := api.Health{Status: "ok", Version: "test", Tier: string(e.sup.Bounds().Tier)}
	if diff := cmp.Diff(want, got); diff != "" || got.Tier == "" {
		t.Errorf("healthz (-want +got):\n%s", diff)
	}
}

func TestExecInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, body string
		status     int
	}{
		{"malformed JSON", `{"command":`, 400},                                     // cut short
		{"not an object", `["echo"]`, 400},                                         // an array
		{"empty body", ``, 400},                                                    // nothing
		{"trailing data", `{"command":"true"} {}`, 400},                            // two objects
		{"unknown field", `{"command":"true","shell":"zsh"}`, 400},                 // not in the contract
		{"command wrong type", `{"command":42}`, 400},                              // number for string
		{"timeout wrong type", `{"command":"true","timeout":"5"}`, 400},            // string for number
		{"env wrong type", `{"command":"true","env":["A=1"]}`, 400},                // array for object
		{"stdin wrong type", `{"command":"true","stdin":1}`, 400},                  // number for string
		{"timeout zero", `{"command":"true","timeout":0}`, 400},                    // below 1
		{"timeout negative", `{"command":"true","timeout":-1}`, 400},               // below 1
		{"timeout too large", `{"command":"true","timeout":301}`, 400},             // above 300
		{"timeout tiny", `{"command":"true","timeout":0.5}`, 400},                  // below 1
		{"empty command", `{"command":""}`, 400},                                   // nothing to run
		{"blank command", `{"command":"  \n"}`, 400},                               // only space
		{"missing command", `{}`, 400},                                             // absent
		{"NUL in command", `{"command":"echo \u0000"}`, 400},                       // cannot pass to exec
		{"bad session", `{"command":"true","session":"../x"}`, 400},                // traversal in a name
		{"bad label", `{"command":"true","label":"a/b"}`, 400},                     // slash in a name
		{"bad policy", `{"command":"true","stdoutPolicy":"middle"}`, 400},          // unknown policy
		{"missing cwd", `{"command":"true","cwd":"/nonexistent/corral"}`, 400},     // no such directory
		{"bad env name", `{"command":"true","env":{"A=B":"1"}}`, 400},              // '=' in a name
		{"oversize body", `{"command":"` + strings.Repeat("x", 1<<20) + `"}`, 413}, // over 1 MiB
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, b := e.do(context.Background(), "POST", "/v1/exec", tt.body)
			if code != tt.status {
				t.Errorf("status %d, want %d: %s", code, tt.status, b)
			}
			want := api.CodeInvalidArgument
			if tt.status == http.StatusRequestEntityTooLarge {
				want = api.CodeResourceExhausted
			}
			if got := errorCode(t, b); got != want {
				t.Errorf("code %s, want %s", got, want)
			}
		})
	}
}

func TestExec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	tests := []struct {
		name, body     string
		stdout, stderr string
		exit           int
	}{
		{"exit code", `{"command":"echo out; echo err >&2; exit 3"}`, "out\n", "err\n", 3},                  // not an HTTP error
		{"stdin", `{"command":"cat","stdin":"fed\n"}`, "fed\n", "", 0},                                      // written then closed
		{"no stdin", `{"command":"cat"}`, "", "", 0},                                                        // /dev/null
		{"env", `{"command":"echo $FOO","env":{"FOO":"bar"}}`, "bar\n", "", 0},                              // override
		{"cwd", `{"command":"pwd","cwd":` + jsonString(dir) + `}`, dir + "\n", "", 0},                       // working directory
		{"timeout in range", `{"command":"echo t","timeout":1.5}`, "t\n", "", 0},                            // fractional seconds
		{"policies", `{"command":"echo p","stdoutPolicy":"head+tail","stderrPolicy":"head"}`, "p\n", "", 0}, // accepted
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := e.exec(tt.body)
			if res.Stdout != tt.stdout || res.Stderr != tt.stderr || res.ExitCode == nil || *res.ExitCode != tt.exit {
				t.Errorf("got stdout %q stderr %q exit %v, want %q %q %d", res.Stdout, res.Stderr, res.ExitCode, tt.stdout, tt.stderr, tt.exit)
			}
		})
	}
}

func TestExecTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.exec(`{"command":"echo before; sleep 30","timeout":1}`)
	if !res.TimedOut || res.ExitCode != nil || res.Stdout != "before\n" || !strings.Contains(res.Stderr, "timed out") {
		t.Errorf("result %+v, want timed out with the output before it", res)
	}
}

func TestReadGrep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.exec(`{"command":"seq 100000","session":"rg"}`)
	spill := res.StdoutInfo.SpillPath
	if !res.Truncated || spill == "" {
		t.Fatalf("seq 100000 did not spill: %+v", res.StdoutInfo)
	}
	rel, err := filepath.Rel(e.data, spill)
	if err != nil {
		t.Fatal(err)
	}

	// A window, by absolute and by relative path.
	for _, p := range []string{spill, rel} {
		code, b := e.do(context.Background(), "POST", "/v1/read", `{"path":`+jsonString(p)+`,"offset":10,"limit":3}`)
		var rr struct {
			Content   string `json:"content"`
			Offset    int    `json:"offset"`
			LineCount int    `json:"lineCount"`
			Root      string `json:"root"`
			Truncated bool   `json:"truncated"`
			Notice    string `json:"notice"`
		}
		if err := json.Unmarshal(b, &rr); err != nil || code != 200 {
			t.Fatalf("read %s: %d %v %s", p, code, err, b)
		}
		if rr.Content != "10\n11\n12\n" || rr.Offset != 10 || rr.LineCount != 3 || rr.Root != "scratch" || !rr.Truncated || !strings.Contains(rr.Notice, "13") {
			t.Errorf("read %s: %+v", p, rr)
		}
	}
	var gr struct {
		Matches []struct {
			Line int    `json:"line"`
			Text string `json:"text"`
		} `json:"matches"`
		Count     int  `json:"count"`
		Truncated bool `json:"truncated"`
	}
	code, b := e.do(context.Background(), "POST", "/v1/grep", `{"path":`+jsonString(spill)+`,"pattern":"^1[0-9]$","headLimit":3}`)
	if err := json.Unmarshal(b, &gr); err != nil || code != 200 {
		t.Fatalf("grep: %d %v %s", code, err, b)
	}
	if gr.Count != 3 || !gr.Truncated || gr.Matches[0].Line != 10 || gr.Matches[2].Text != "12" {
		t.Errorf("grep with headLimit 3: %+v", gr)
	}
}

func TestReadGrepRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.data, "scratch", "s1", "tool-output")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin.log")
	if err := os.WriteFile(bin, []byte("ELF\x00\x01\x02binary\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, code string
		status           int
	}{
		{"dot-dot", "../" + filepath.Base(filepath.Dir(outside)) + "/secret.txt", api.CodeNotFound, 404}, // relative escape
		{"deep dot-dot", "scratch/s1/../../../../../../../etc/passwd", api.CodeNotFound, 404},            // climbs out
		{"absolute elsewhere", outside, api.CodeNotFound, 404},                                           // another directory
		{"etc passwd", "/etc/passwd", api.CodeNotFound, 404},                                             // a system file
		{"symlink out", link, api.CodeNotFound, 404},                                                     // resolves outside
		{"missing", filepath.Join(dir, "nope.log"), api.CodeNotFound, 404},                               // no such file
		{"directory", dir, api.CodeNotFound, 404},                                                        // not a file
		{"empty path", "", api.CodeNotFound, 404},                                                        // nothing
		{"binary", bin, api.CodeBinaryContent, 400},                                                      // NUL bytes
	}
	for _, tt := range tests {
		for _, ep := range []string{"/v1/read", "/v1/grep"} {
			body := `{"path":` + jsonString(tt.path) + `}`
			if ep == "/v1/grep" {
				body = `{"path":` + jsonString(tt.path) + `,"pattern":"secret|binary"}`
			}
			code, b := e.do(context.Background(), "POST", ep, body)
			if code != tt.status || errorCode(t, b) != tt.code {
				t.Errorf("%s %s: status %d %s, want %d %s", ep, tt.name, code, b, tt.status, tt.code)
			}
			if strings.Contains(string(b), "secret\\n") {
				t.Errorf("%s %s: leaked the file: %s", ep, tt.name, b)
			}
		}
	}
	bad := []struct{ name, ep, body string }{
		{"bad regexp", "/v1/grep", `{"path":"x","pattern":"("}`},                        // does not compile
		{"negative offset", "/v1/read", `{"path":` + jsonString(bin) + `,"offset":-1}`}, // budget refuses
		{"unknown field", "/v1/read", `{"path":"x","lines":3}`},                         // not in the contract
		{"wrong type", "/v1/grep", `{"path":"x","pattern":"a","headLimit":"3"}`},        // string for number
	}
	for _, tt := range bad {
		code, b := e.do(context.Background(), "POST", tt.ep, tt.body)
		if tt.name == "negative offset" {
			// The binary check may come first; either refusal is right, a 200 is not.
			if code == 200 {
				t.Errorf("%s: accepted: %s", tt.name, b)
			}
			continue
		}
		if code != 400 || errorCode(t, b) != api.CodeInvalidArgument {
			t.Errorf("%s: status %d %s, want 400 INVALID_ARGUMENT", tt.name, code, b)
		}
	}
}

func TestDeleteSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.exec(`{"command":"seq 100000","session":"gone"}`)
	if res.StdoutInfo.SpillPath == "" {
		t.Fatal("no spill")
	}
	code, b := e.do(context.Background(), "DELETE", "/v1/sessions/gone", "")
	if code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, b)
	}
	if _, err := os.Stat(res.StdoutInfo.SpillPath); !os.IsNotExist(err) {
		t.Errorf("spill file still there: %v", err)
	}
	code, b = e.do(context.Background(), "POST", "/v1/read", `{"path":`+jsonString(res.StdoutInfo.SpillPath)+`}`)
	if code != 404 || errorCode(t, b) != api.CodeNotFound {
		t.Errorf("read after delete: %d %s", code, b)
	}
	// A session that never spilled is fine; a malformed ID is not.
	if code, b := e.do(context.Background(), "DELETE", "/v1/sessions/never", ""); code != http.StatusNoContent {
		t.Errorf("delete unknown session: %d %s", code, b)
	}
	if code, b := e.do(context.Background(), "DELETE", "/v1/sessions/bad%20id", ""); code != 400 || errorCode(t, b) != api.CodeInvalidArgument {
		t.Errorf("delete \"bad id\": %d %s", code, b)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`{"command":"printf 12345"}`)
	e.exec(`{"command":"exit 1"}`)
	e.exec(`{"command":"sleep 5 & echo bg"}`) // one lingering process killed
	e.do(context.Background(), "POST", "/v1/exec", `{"command":""}`)
	code, b := e.do(context.Background(), "GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		`corral_commands_total{face="http",outcome="success"} 2`,
		`corral_commands_total{face="http",outcome="failure"} 1`,
		`corral_commands_total{face="http",outcome="invalid"} 1`,
		`corral_command_duration_seconds_count 3`,
		`corral_drained_bytes_total{stream="stdout"} 8`,
		`corral_processes_killed_total 1`,
		`corral_commands_running 0`,
	} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

// TestExecResultJSON checks the wire names of the Result against the contract (docs/wire.md).
func TestExecResultJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, b := e.do(context.Background(), "POST", "/v1/exec", `{"command":"echo hi"}`)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"stdout", "stderr", "exitCode", "signal", "timedOut", "aborted", "durationMs", "truncated", "stdoutInfo", "stderrInfo", "kill"} {
		if _, ok := m[k]; !ok {
			t.Errorf("Result JSON lacks %q: %s", k, b)
		}
	}
	var res supervisor.Result
	json.Unmarshal(b, &res)
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "hi\n" {
		t.Errorf("result %s", b)
	}
}

func TestBrowserGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	tests := []struct {
		name         string
		host         string // "" keeps the server's own
		origin, site string
		status       int
	}{
		{"plain client", "", "", "", 200},                                  // curl, SDKs
		{"localhost name", "localhost", "", "", 200},                       // a loopback name
		{"localhost in capitals", "LOCALHOST", "", "", 200},                // host names know no case
		{"localhost, rooted", "localhost.", "", "", 200},                   // the root's trailing dot
		{"localhost, rooted, port", "Localhost.:7823", "", "", 200},        // with a port
		{"IPv6 loopback", "[::1]", "", "", 200},                            // brackets, no port
		{"IPv6 loopback, port", "[::1]:7823", "", "", 200},                 // brackets and a port
		{"localhost lookalike", "localhost.evil.example", "", "", 403},     // a name under another domain
		{"same origin", "", "SELF", "same-origin", 200},                    // the server's own page
		{"rebound host", "evil.example", "", "", 403},                      // DNS rebinding
		{"rebound with port", "evil.example:7823", "", "", 403},            // the same, with a port
		{"cross-site fetch", "", "http://evil.example", "cross-site", 403}, // CSRF by a modern browser
		{"cross-origin, old browser", "", "http://evil.example", "", 403},  // Origin only
	}
	for i, tt := range tests {
		file := filepath.Join(dir, fmt.Sprint(i))
		req, _ := http.NewRequest("POST", e.ts.URL+"/v1/exec", strings.NewReader(`{"command":"touch `+file+`"}`))
		req.Header.Set("Content-Type", "text/plain")
		if tt.host != "" {
			req.Host = tt.host
		}
		if tt.origin == "SELF" {
			tt.origin = e.ts.URL
		}
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		if tt.site != "" {
			req.Header.Set("Sec-Fetch-Site", tt.site)
		}
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_, statErr := os.Stat(file)
		if resp.StatusCode != tt.status || (tt.status == 200) != (statErr == nil) {
			t.Errorf("%s: status %d (ran: %v), want %d: %s", tt.name, resp.StatusCode, statErr == nil, tt.status, b)
		}
		if tt.status == 403 && errorCode(t, b) != api.CodePermissionDenied {
			t.Errorf("%s: %s", tt.name, b)
		}
	}
}
