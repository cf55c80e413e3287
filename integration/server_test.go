//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// server is one `corral serve` process on a random loopback port.
type server struct {
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:PORT
	token  string
	client *http.Client
	logs   chan struct{} // closed when the log reader reached EOF
}

// startServer starts `corral serve --listen 127.0.0.1:0` with a random token
// and a temporary data directory, reads the chosen address from its
// "serving" log line, and keeps draining its log so it never blocks. The
// server is stopped with SIGTERM at cleanup unless the test killed it.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	return startServerWith(t, (*exec.Cmd).Start, extra...)
}

// startServerWith is startServer with the start of the process given:
// (*exec.Cmd).Start, or a proctest.Safety's Start to run the server inside
// a safety cgroup.
func startServerWith(t testing.TB, start func(*exec.Cmd) error, extra ...string) *server {
	t.Helper()
	var b [16]byte
	rand.Read(b[:])
	s := &server{token: hex.EncodeToString(b[:]), logs: make(chan struct{})}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, extra...)
	s.cmd = exec.Command(corralBin, args...)
	s.cmd.Env = append(os.Environ(), "CORRAL_TOKEN="+s.token, "CORRAL_CONTAINMENT=")
	logs, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := start(s.cmd); err != nil {
		t.Fatalf("start corral serve: %v", err)
	}
	addr := make(chan string, 1)
	go s.readLogs(logs, addr)
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.logs:
		s.cmd.Wait()
		t.Fatal("corral serve exited before serving")
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		s.cmd.Wait()
		t.Fatal("corral serve did not log its address within 30 s")
	}
	s.client = &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() { s.stop(t) })
	return s
}

// readLogs scans the server's JSON log for the "serving" line, sends its
// address, and then discards the rest until EOF.
func (s *server) readLogs(r io.Reader, addr chan<- string) {
	defer close(s.logs)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		if sent {
			continue
		}
		var line struct {
			Message string `json:"message"`
			Listen  string `json:"listen"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "serving" {
			addr <- line.Listen
			sent = true
		}
	}
	io.Copy(io.Discard, r)
}

// stop ends the server with SIGTERM (unless it already exited) and reaps it.
func (s *server) stop(t testing.TB) {
	s.client.CloseIdleConnections()
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		if err := s.cmd.Wait(); err != nil {
			t.Errorf("corral serve after SIGTERM: %v", err)
		}
	}
	<-s.logs
}

// pid is the server's process ID.
func (s *server) pid() int { return s.cmd.Process.Pid }

// request builds an authenticated request with a JSON body.
func (s *server) request(ctx context.Context, method, path string, body any) *http.Request {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// exec runs one request through POST /v1/exec and returns the Result.
func (s *server) exec(t testing.TB, body api.ExecRequest) supervisor.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	resp, err := s.client.Do(s.request(ctx, http.MethodPost, "/v1/exec", body))
	if err != nil {
		t.Fatalf("POST /v1/exec %q: %v", body.Command, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST /v1/exec %q: read: %v", body.Command, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/exec %q: %s: %s", body.Command, resp.Status, b)
	}
	return decodeResult(t, b)
}

// frontend runs calls through POST /v1/exec with the marker in env.
func (s *server) frontend() frontend {
	return frontend{name: "server", run: func(t *testing.T, c call) supervisor.Result {
		t.Helper()
		if c.dir == "" {
			c.dir = t.TempDir()
		}
		body := api.ExecRequest{Command: c.command, Cwd: c.dir, Env: map[string]string{proctest.MarkerEnv: c.marker}}
		if c.timeout > 0 {
			body.Timeout = &c.timeout
		}
		return s.exec(t, body)
	}}
}

// stream starts an NDJSON exec and returns the response and a decoder of its
// events; cancel aborts the request (the client going away).
func (s *server) stream(t *testing.T, ctx context.Context, body api.ExecRequest) (*http.Response, *json.Decoder) {
	t.Helper()
	req := s.request(ctx, http.MethodPost, "/v1/exec", body)
	req.Header.Set("Accept", api.NDJSONType)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/exec (NDJSON) %q: %v", body.Command, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("POST /v1/exec (NDJSON) %q: %s: %s", body.Command, resp.Status, b)
	}
	return resp, json.NewDecoder(resp.Body)
}

// waitOutput reads events until an output event whose data contains want,
// and returns the start event's pid. It fails t on a result event or EOF.
func waitOutput(t *testing.T, dec *json.Decoder, want string) (pid int) {
	t.Helper()
	var seen strings.Builder
	for {
		var ev supervisor.Event
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("waiting for %q in the event stream: %v (output so far %q)", want, err, seen.String())
		}
		switch ev.Event {
		case supervisor.EventStart:
			pid = ev.Pid
		case supervisor.EventOutput:
			seen.WriteString(ev.Data)
			if strings.Contains(seen.String(), want) {
				return pid
			}
		case supervisor.EventResult:
			t.Fatalf("result before %q: %+v", want, ev.Result)
		}
	}
}

// metric reads one unlabelled sample from GET /metrics, or reports false.
func (s *server) metric(t *testing.T, name string) (float64, bool) {
	t.Helper()
	resp, err := s.client.Do(s.request(context.Background(), http.MethodGet, "/metrics", nil))
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f, true
			}
		}
	}
	return 0, false
}
