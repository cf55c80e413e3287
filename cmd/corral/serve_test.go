package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// built is the corral binary the package's tests share: built once, on first
// use, into a directory TestMain removes when the tests are done.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// corralBinary builds the corral binary once for the whole test binary and
// returns its path; corral-server, which corral serve, mcp and doctor
// execute, is built next to it. Tests only execute them; none may change or
// remove them.
func corralBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the corral binary")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "corral-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "corral")
		built.err = buildBoth(built.dir)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// buildBoth builds corral and corral-server into dir.
func buildBoth(dir string) error {
	if out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "../corral-server").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// removeBuilt removes the shared binary's directory, if one was made.
func removeBuilt() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// server is one `corral serve` process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // host:port or unix:/path
	client *http.Client
	token  string
	logs   *logLines
	waited chan error
}

// logLines collects the server's stderr and reports the address it serves.
type logLines struct {
	mu    sync.Mutex
	lines []string
	ready chan string // receives the listen address once
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startServe starts `corral serve` with args and extra environment and
// waits until it logs the address it serves; when the server generated its
// token, the client sends it. It is killed at the end of the test if it is
// still running.
func startServe(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	dataDir := t.TempDir()
	cmd := exec.Command(corralBinary(t), append([]string{"serve", "--data-dir", dataDir, "--grace", "0.5"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return startServeCmd(t, cmd, dataDir)
}

// startServeCmd is startServe with the command line given (the server's
// data directory is dataDir).
func startServeCmd(t *testing.T, cmd *exec.Cmd, dataDir string) *server {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, logs: &logLines{ready: make(chan string, 1)}, waited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.logs.mu.Lock()
			s.logs.lines = append(s.logs.lines, line)
			s.logs.mu.Unlock()
			var l struct{ Message, Listen string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "serving" {
				s.logs.ready <- l.Listen
			}
		}
		s.waited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.waited
		}
		if t.Failed() {
			t.Logf("corral serve logs:\n%s", s.logs)
		}
	})
	select {
	case s.addr = <-s.logs.ready:
	case err := <-s.waited:
		s.waited <- err
		t.Fatalf("corral serve exited: %v\n%s", err, s.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("corral serve did not start:\n%s", s.logs)
	}
	tr := &http.Transport{}
	if path, ok := strings.CutPrefix(s.addr, "unix:"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}
		s.addr = "unix"
	}
	t.Cleanup(tr.CloseIdleConnections)
	s.client = &http.Client{Transport: tr}
	if b, err := os.ReadFile(filepath.Join(dataDir, "token")); err == nil {
		s.token = strings.TrimSpace(string(b))
	}
	return s
}

func (s *server) request(ctx context.Context, method, path, body string, hdr ...string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+s.addr+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func (s *server) exec(body string) supervisor.Result {
	s.t.Helper()
	resp := s.request(context.Background(), "POST", "/v1/exec", body)
	defer resp.Body.Close()
	var res supervisor.Result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 {
		s.t.Fatalf("exec %s: status %d, %v", body, resp.StatusCode, err)
	}
	return res
}

// hwmKB is the peak RSS of the server process.
func (s *server) hwmKB() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		s.t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	s.t.Fatal("no VmHWM")
	return 0
}

func TestServeToken(t *testing.T) {
	t.Parallel()
	s := startServe(t, []string{"CORRAL_TOKEN=tok-" + strconv.Itoa(os.Getpid())}, "--listen", "127.0.0.1:0")
	// Without the token: 401, except /healthz.
	resp := s.request(context.Background(), "POST", "/v1/exec", `{"command":"true"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("exec without token: %d", resp.StatusCode)
	}
	resp = s.request(context.Background(), "GET", "/healthz", "")
	var h api.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h.Status != "ok" || h.Version != Version || h.Tier == "" {
		t.Errorf("healthz: %d %+v", resp.StatusCode, h)
	}
	// With it: the token never reaches a command, even when asked for.
	s.token = "tok-" + strconv.Itoa(os.Getpid())
	for _, body := range []string{
		`{"command":"echo ${CORRAL_TOKEN-unset}; env | grep -c tok- || true"}`,
		`{"command":"echo ${CORRAL_TOKEN-unset}; env | grep -c tok- || true","env":{"CORRAL_TOKEN":"tok-x"}}`,
	} {
		if res := s.exec(body); res.Stdout != "unset\n0\n" {
			t.Errorf("%s: stdout %q, want the token unset", body, res.Stdout)
		}
	}
}

func TestServeRefusesExposedWithoutToken(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(corralBinary(t), "serve", "--listen", "0.0.0.0:0", "--data-dir", t.TempDir(), "--insecure-no-auth")
	cmd.Env = append(os.Environ(), "CORRAL_TOKEN=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "refusing to listen on 0.0.0.0:0 without a token") {
		t.Errorf("exit %v, output %s", err, out)
	}
}

func TestServeUnixSocket(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "corral.sock")
	s := startServe(t, []string{"CORRAL_TOKEN="}, "--listen", "unix:"+sock)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket %v: %v", fi.Mode(), err)
	}
	if res := s.exec(`{"command":"echo via socket"}`); res.Stdout != "via socket\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

// TestServeNDJSONFlood floods both streams through the built server:
// seq contiguous per stream, the result last, the server's memory bounded.
func TestServeNDJSONFlood(t *testing.T) {
	proctest.Heavy(t)
	t.Parallel()
	s := startServe(t, []string{"CORRAL_TOKEN="}, "--listen", "127.0.0.1:0")
	before := s.hwmKB()
	const size = 200 << 20
	resp := s.request(context.Background(), "POST", "/v1/exec",
		fmt.Sprintf(`{"command":"yes | head -c %d & yes e | head -c %d >&2; wait"}`, size, size), "Accept", api.NDJSONType)
	defer resp.Body.Close()
	seq := map[supervisor.Stream]int64{}
	var last supervisor.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if last.Event == supervisor.EventResult {
			t.Fatalf("a line after the result: %.100s", sc.Text())
		}
		last = supervisor.Event{}
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("line %.100q: %v", sc.Text(), err)
		}
		if last.Stream != "" {
			if last.Seq != seq[last.Stream]+1 {
				t.Fatalf("%s seq %d after %d", last.Stream, last.Seq, seq[last.Stream])
			}
			seq[last.Stream] = last.Seq
		}
	}
	if last.Event != supervisor.EventResult || last.Result.StdoutInfo.TotalBytes != size || last.Result.StderrInfo.TotalBytes != size {
		t.Fatalf("last event %+v", last)
	}
	after := s.hwmKB()
	t.Logf("server peak RSS %d MiB before, %d MiB after 2×%d MiB", before>>10, after>>10, size>>20)
	if after-before > 64<<10 {
		t.Errorf("server peak RSS grew by %d MiB streaming %d MiB", (after-before)>>10, 2*size>>20)
	}
}

// TestServeSIGTERM stops the server with a command running: exit 0 within
// the grace + 2 s, the command's tree gone, the client told it was aborted.
func TestServeSIGTERM(t *testing.T) {
	t.Parallel()
	s := startServe(t, []string{"CORRAL_TOKEN="}, "--listen", "127.0.0.1:0")
	_, marker := proctest.Marker(t)
	resp := s.request(context.Background(), "POST", "/v1/exec",
		`{"command":"sleep 60 & echo ready; wait","env":{"`+proctest.MarkerEnv+`":"`+marker+`"}}`, "Accept", api.NDJSONType)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before ready: %v", err)
		}
		if strings.Contains(line, `"data":"ready\n"`) {
			break
		}
	}
	begin := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.waited:
		if err != nil {
			t.Errorf("corral serve exited with %v, want 0", err)
		}
	case <-time.After(2500 * time.Millisecond):
		t.Fatalf("still running 2.5 s after SIGTERM (grace 0.5 s)")
	}
	t.Logf("exited %v after SIGTERM", time.Since(begin))
	proctest.NoSurvivors(t, marker, 0)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `"aborted":true`) {
		t.Errorf("the client was not told: %s", rest)
	}
}

// TestServeTokenSources: serve always has a token unless told otherwise. A
// generated one is written 0600 to <dataDir>/token and logged by path, never
// by value; --token-file is read; --token works and warns; only
// --insecure-no-auth serves without one, and warns.
func TestServeTokenSources(t *testing.T) {
	t.Parallel()
	tokFile := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(tokFile, []byte("  from-file-token\n"), 0o600)
	tests := []struct {
		name  string
		args  []string
		token string // "" means the generated one, read from the data dir
		warn  string // a warning the log must carry
		open  bool   // no token needed
	}{
		{"generated", nil, "", "", false},
		{"token file", []string{"--token-file", tokFile}, "from-file-token", "", false},
		{"flag", []string{"--token", "from-flag-token"}, "from-flag-token", "every local process can read", false},
		{"no auth", []string{"--insecure-no-auth"}, "", "--insecure-no-auth: no token", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServe(t, []string{"CORRAL_TOKEN="}, append([]string{"--listen", "127.0.0.1:0"}, tc.args...)...)
			logs := s.logs.String()
			if tc.warn != "" && !strings.Contains(logs, `"level":"warn"`) || !strings.Contains(logs, tc.warn) {
				t.Errorf("no warning %q in the log:\n%s", tc.warn, logs)
			}
			switch {
			case tc.token != "":
				s.token = tc.token
			case !tc.open:
				if s.token == "" || strings.Contains(logs, s.token) || !strings.Contains(logs, `"tokenFile":"`) {
					t.Errorf("generated token %q: not written, or in the log, or its path is not:\n%s", s.token, logs)
				}
			}
			want := s.token
			s.token = ""
			resp := s.request(context.Background(), "POST", "/v1/exec", `{"command":"true"}`)
			resp.Body.Close()
			if tc.open != (resp.StatusCode == http.StatusOK) {
				t.Errorf("without a token: %d", resp.StatusCode)
			}
			s.token = want
			if res := s.exec(`{"command":"echo ok"}`); res.Stdout != "ok\n" {
				t.Errorf("with the token: %q", res.Stdout)
			}
		})
	}
}
