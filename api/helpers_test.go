package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
	"github.com/corral-sh/corral/supervisor/vtemu"
)

func TestMain(m *testing.M) {
	if os.Getenv(proctest.HelperEnv) != "" {
		proctest.Main(m)
	}
	goleak.VerifyTestMain(m)
}

const testToken = "s3cret-token"

// env is one test server: the supervisor, the API server over it, an
// httptest server and a client of its own.
type env struct {
	t      *testing.T
	sup    *supervisor.Supervisor
	srv    *api.Server
	ts     *httptest.Server
	client *http.Client
	token  string
	data   string
}

type option func(*api.Config, *supervisor.Config)

func withToken(tok string) option {
	return func(c *api.Config, _ *supervisor.Config) { c.Token = tok }
}

func withMaxConcurrent(n int) option {
	return func(c *api.Config, _ *supervisor.Config) { c.MaxConcurrent = n }
}

func withGrace(d time.Duration) option {
	return func(_ *api.Config, c *supervisor.Config) { c.Grace = d }
}

func withHeartbeat(d time.Duration) option {
	return func(c *api.Config, _ *supervisor.Config) { c.Heartbeat = d }
}

// newEnv starts a server with a fresh data directory and a short grace, and
// tears everything down at the end of the test.
func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	e := &env{t: t, data: t.TempDir()}
	scfg := supervisor.Config{DataDir: e.data, Grace: 200 * time.Millisecond, Emulator: emulator}
	acfg := api.Config{Version: "test"}
	for _, o := range opts {
		o(&acfg, &scfg)
	}
	sup, err := supervisor.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	acfg.Supervisor = sup
	srv, err := api.New(acfg)
	if err != nil {
		sup.Close()
		t.Fatal(err)
	}
	e.sup, e.srv, e.token = sup, srv, acfg.Token
	e.ts = httptest.NewServer(srv.Handler())
	tr := &http.Transport{}
	e.client = &http.Client{Transport: tr}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		e.ts.Close()
		tr.CloseIdleConnections()
		sup.Close()
	})
	return e
}

// do sends a request with the token (when the env has one) and returns the
// status and the body.
func (e *env) do(ctx context.Context, method, path, body string, hdr ...string) (int, []byte) {
	e.t.Helper()
	resp := e.send(ctx, method, path, body, hdr...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

func (e *env) send(ctx context.Context, method, path, body string, hdr ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// exec runs body through POST /v1/exec and decodes the Result; it fails
// the test unless the status is 200.
func (e *env) exec(body string) supervisor.Result {
	e.t.Helper()
	code, b := e.do(context.Background(), "POST", "/v1/exec", body)
	if code != http.StatusOK {
		e.t.Fatalf("exec %s: status %d: %s", body, code, b)
	}
	var res supervisor.Result
	if err := json.Unmarshal(b, &res); err != nil {
		e.t.Fatalf("exec: %v in %s", err, b)
	}
	return res
}

// errorCode decodes the error JSON and returns its code, failing the test
// when the body is not the error JSON.
func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	var body api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Error.Code == "" || body.Error.Message == "" {
		t.Fatalf("not the error JSON (%v): %s", err, b)
	}
	return body.Error.Code
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// events reads NDJSON lines from r, calling fn for each until it returns
// false or the stream ends.
func events(t *testing.T, r io.Reader, fn func(line []byte, ev supervisor.Event) bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 8<<20)
	for sc.Scan() {
		var ev supervisor.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bad NDJSON line %q: %v", sc.Bytes(), err)
		}
		if !fn(sc.Bytes(), ev) {
			return
		}
	}
}

// marked prefixes command with the test's marker, so every process it
// starts carries it.
func marked(marker, command string) string {
	return "export " + proctest.MarkerEnv + "=" + marker + "; " + command
}

// emulator is corral's terminal emulator, as corral-server gives it
// (supervisor.Config.Emulator).
func emulator(cols, rows int) supervisor.Emulator { return vtemu.New(cols, rows) }
