package api_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
)

// TestEveryAnswerIsTheErrorJSON sends, on the wire, what net/http's server
// or ServeMux answer before any handler of corral's runs: headers over the
// server's limit (431), a request the server cannot parse (400), and paths
// ServeMux redirects to their clean form (307, 301). Each answer must be the
// error JSON, with the status (and the redirect's Location) kept.
func TestEveryAnswerIsTheErrorJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ts := httptest.NewUnstartedServer(e.srv.Handler())
	ts.Listener = api.LimitListener(ts.Listener, 0)
	ts.Start()
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()

	big := "X-Big: " + strings.Repeat("a", http.DefaultMaxHeaderBytes+8192) + "\r\n"
	tests := []struct {
		name     string
		raw      string // the request as sent
		status   int
		code     string
		location string // the Location kept, "" when none
	}{
		// headers past MaxHeaderBytes: net/http answers before any handler
		{"headers too large", "GET /v1/jobs HTTP/1.1\r\nHost: localhost\r\n" + big + "\r\n", 431, api.CodeResourceExhausted, ""},
		// an HTTP/1.1 request without Host
		{"no host", "GET /v1/jobs HTTP/1.1\r\n\r\n", 400, api.CodeInvalidArgument, ""},
		// a malformed header line
		{"malformed header", "GET /v1/jobs HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n", 400, api.CodeInvalidArgument, ""},
		// ServeMux cleans // and redirects a POST with 307
		{"unclean POST", "POST /v1//exec HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}", 307, api.CodeInvalidArgument, "/v1/exec"},
		// and a GET of /./ (307 too)
		{"unclean GET", "GET /v1/./jobs HTTP/1.1\r\nHost: localhost\r\n\r\n", 307, api.CodeInvalidArgument, "/v1/jobs"},
	}
	for _, tt := range tests {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		go func() { io.WriteString(c, tt.raw) }() // the server may answer before it read everything
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s, want %d application/json: %s", tt.name, resp.StatusCode, resp.Header.Get("Content-Type"), tt.status, b)
			continue
		}
		if code := errorCode(t, b); code != tt.code {
			t.Errorf("%s: code %s, want %s: %s", tt.name, code, tt.code, b)
		}
		if loc := resp.Header.Get("Location"); loc != tt.location {
			t.Errorf("%s: Location %q, want %q", tt.name, loc, tt.location)
		}
	}
}
