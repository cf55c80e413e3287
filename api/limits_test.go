package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

func withBodyTimeout(d time.Duration) option {
	return func(c *api.Config, _ *supervisor.Config) { c.BodyTimeout = d }
}

// rawResponses writes raw to a fresh connection to ts and reads responses
// until the server closes the connection (or within fails the test). It
// returns the responses with their bodies read, and how long until EOF.
func rawResponses(t *testing.T, url, raw string, within time.Duration) ([]*http.Response, []string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	begin := time.Now()
	c.SetDeadline(begin.Add(within))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var resps []*http.Response
	var bodies []string
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if _, eof := br.Peek(1); eof != io.EOF {
				t.Fatalf("after %d responses: %v; the connection was not closed within %v", len(resps), err, within)
			}
			return resps, bodies, time.Since(begin)
		}
		b, _ := io.ReadAll(resp.Body)
		resps = append(resps, resp)
		bodies = append(bodies, string(b))
	}
}

// TestAuthScheme: the Bearer scheme matches in any case (RFC 7235), any
// other form is refused; a 401 says which scheme and closes the connection,
// so a client without the token keeps no connection open: of two pipelined
// requests only the first is answered.
func TestAuthScheme(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withToken(testToken))
	tests := []struct {
		name   string
		header []string // Authorization values
		ok     bool
	}{
		{"canonical", []string{"Bearer " + testToken}, true},                              // as documented
		{"lower case", []string{"bearer " + testToken}, true},                             // RFC 7235: case-insensitive scheme
		{"upper case", []string{"BEARER " + testToken}, true},                             // likewise
		{"several spaces", []string{"Bearer   " + testToken}, true},                       // 1*SP
		{"empty credential", []string{"Bearer "}, false},                                  // nothing after the scheme
		{"scheme alone", []string{"Bearer"}, false},                                       // no space, no credential
		{"tab", []string{"Bearer\t" + testToken}, false},                                  // SP only
		{"two headers", []string{"Bearer " + testToken, "Bearer " + testToken}, false},    // ambiguous
		{"token in scheme case", []string{"Bearer " + strings.ToUpper(testToken)}, false}, // the credential is exact
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("GET", e.ts.URL+"/v1/jobs", nil)
		req.Header["Authorization"] = tt.header
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case tt.ok && resp.StatusCode != http.StatusOK:
			t.Errorf("%s: %d %s, want 200", tt.name, resp.StatusCode, b)
		case !tt.ok && (resp.StatusCode != http.StatusUnauthorized || errorCode(t, b) != api.CodeUnauthenticated):
			t.Errorf("%s: %d %s, want 401 UNAUTHENTICATED", tt.name, resp.StatusCode, b)
		case !tt.ok && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer"):
			t.Errorf("%s: WWW-Authenticate %q, want the Bearer challenge", tt.name, resp.Header.Get("WWW-Authenticate"))
		}
	}

	// Two pipelined requests without the token: one 401, then EOF.
	get := "GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	resps, _, _ := rawResponses(t, e.ts.URL, get+get, 5*time.Second)
	if len(resps) != 1 || resps[0].StatusCode != http.StatusUnauthorized || !resps[0].Close {
		t.Errorf("pipelined unauthenticated requests: %d responses, want one 401 with Connection: close", len(resps))
	}
	// A POST whose body never comes: the 401 closes at once, not after
	// the body timeout (30 s here).
	post := "POST /v1/exec HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"comm"
	resps, _, took := rawResponses(t, e.ts.URL, post, 5*time.Second)
	if len(resps) != 1 || resps[0].StatusCode != http.StatusUnauthorized || took > 3*time.Second {
		t.Errorf("unauthenticated slow body: %d responses, closed after %v; want one 401 and a close within 3 s", len(resps), took)
	}
}

// TestBodyTimeout: a body that does not arrive within the body timeout is
// answered 408 and its connection closed.
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withToken(testToken), withBodyTimeout(300*time.Millisecond))
	for _, path := range []string{"/v1/exec", "/v1/jobs", "/v1/read"} {
		raw := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testToken +
			"\r\nContent-Length: 100\r\n\r\n{\"comm"
		resps, bodies, took := rawResponses(t, e.ts.URL, raw, 5*time.Second)
		if len(resps) != 1 || resps[0].StatusCode != http.StatusRequestTimeout || took > 3*time.Second {
			t.Errorf("%s: %d responses %q after %v, want one 408 within 3 s", path, len(resps), bodies, took)
			continue
		}
		if code := errorCode(t, []byte(bodies[0])); code != api.CodeInvalidArgument || !strings.Contains(bodies[0], "did not arrive within 300ms") {
			t.Errorf("%s: %s", path, bodies[0])
		}
	}
	// Job stdin reads its body raw.
	st := e.startJob(`{"command":"cat","interactive":true}`)
	raw := "POST /v1/jobs/" + st.ID + "/stdin HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testToken +
		"\r\nContent-Length: 100\r\n\r\nabc"
	if resps, bodies, _ := rawResponses(t, e.ts.URL, raw, 5*time.Second); len(resps) != 1 || resps[0].StatusCode != http.StatusRequestTimeout {
		t.Errorf("stdin: %d responses %q, want one 408", len(resps), bodies)
	}
}

// TestBodyTimeoutSparesLongRequests: the body deadline ends with the body:
// a command, an NDJSON stream and a long poll that last longer than the
// body timeout are not cut, and the connection stays usable.
func TestBodyTimeoutSparesLongRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withBodyTimeout(200*time.Millisecond))
	res := e.exec(`{"command":"sleep 1; echo done"}`)
	if res.Aborted || res.Stdout != "done\n" {
		t.Errorf("plain exec over the body timeout: %+v", res)
	}
	resp := e.streamExec(context.Background(), `{"command":"sleep 1; echo done"}`)
	var last supervisor.Event
	events(t, resp.Body, func(_ []byte, ev supervisor.Event) bool { last = ev; return true })
	resp.Body.Close()
	if last.Result == nil || last.Result.Aborted || last.Result.Stdout != "done\n" {
		t.Errorf("NDJSON exec over the body timeout: last event %+v", last)
	}
	st := e.startJob(`{"command":"sleep 1; echo done"}`)
	code, b := e.do(context.Background(), "GET", "/v1/jobs/"+st.ID+"/output?wait=5", "")
	var out supervisor.JobOutput
	json.Unmarshal(b, &out)
	if code != http.StatusOK || out.Data != "done\n" {
		t.Errorf("long poll over the body timeout: %d %s", code, b)
	}
	code, b = e.do(context.Background(), "POST", "/v1/jobs/"+st.ID+"/wait?timeout=5", `{}`)
	if code != http.StatusOK {
		t.Errorf("wait with a body: %d %s", code, b)
	}
}

// TestLimitListener: past its cap the listener answers 503 UNAVAILABLE
// with Retry-After and the error JSON; a closed connection frees its slot.
func TestLimitListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ts := httptest.NewUnstartedServer(e.srv.Handler())
	ts.Listener = api.LimitListener(ts.Listener, 2)
	ts.Start()
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func() (int, http.Header, []byte) {
		resp, err := client.Get(ts.URL + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	code, hdr, b := get()
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "1" || errorCode(t, b) != api.CodeUnavailable ||
		!strings.Contains(string(b), "2 connections open") {
		t.Errorf("third connection: %d Retry-After %q %s, want 503 UNAVAILABLE with Retry-After 1", code, hdr.Get("Retry-After"), b)
	}
	idle[0].Close()
	waitFor(t, 5*time.Second, func() bool { code, _, _ := get(); return code == http.StatusOK })
}
