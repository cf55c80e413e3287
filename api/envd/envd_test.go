package envd_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/corral-sh/corral/api/envd"
	"github.com/corral-sh/corral/api/envd/processpb"
	"github.com/corral-sh/corral/api/envd/processpb/processpbconnect"
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

// env is one test envd: a supervisor, the Service over it, an httptest
// server on loopback and a Connect client of each codec.
type env struct {
	t       *testing.T
	sup     *supervisor.Supervisor
	ts      *httptest.Server
	client  processpbconnect.ProcessClient // binary protobuf
	json    processpbconnect.ProcessClient // Connect JSON, as the JS SDK speaks
	grpc    processpbconnect.ProcessClient // gRPC over HTTP/2 without TLS
	grpcWeb processpbconnect.ProcessClient // gRPC-Web over HTTP/1.1
}

type option func(*envd.Config, *supervisor.Config)

func withToken(tok string) option {
	return func(c *envd.Config, _ *supervisor.Config) { c.Token = tok }
}

func withCapture(n int) option {
	return func(_ *envd.Config, c *supervisor.Config) { c.Capture = supervisor.CaptureLimits{MaxBytes: n} }
}

func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	scfg := supervisor.Config{DataDir: t.TempDir(), Grace: 200 * time.Millisecond, Emulator: emulator}
	ecfg := envd.Config{}
	for _, o := range opts {
		o(&ecfg, &scfg)
	}
	sup, err := supervisor.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	ecfg.Supervisor = sup
	svc, err := envd.New(ecfg)
	if err != nil {
		sup.Close()
		t.Fatal(err)
	}
	// HTTP/1.1 and HTTP/2 without TLS, as corral serve --envd listens.
	var protocols, h2c http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	h2c.SetUnencryptedHTTP2(true)
	e := &env{t: t, sup: sup, ts: httptest.NewUnstartedServer(svc.Handler())}
	e.ts.Config.Protocols = &protocols
	e.ts.Start()
	tr := &http.Transport{}
	h2 := &http.Transport{Protocols: &h2c}
	hc := &http.Client{Transport: tr}
	e.client = processpbconnect.NewProcessClient(hc, e.ts.URL)
	e.json = processpbconnect.NewProcessClient(hc, e.ts.URL, connect.WithProtoJSON())
	e.grpc = processpbconnect.NewProcessClient(&http.Client{Transport: h2}, e.ts.URL, connect.WithGRPC())
	e.grpcWeb = processpbconnect.NewProcessClient(hc, e.ts.URL, connect.WithGRPCWeb())
	t.Cleanup(func() {
		sup.Close() // kills every job, so every stream ends
		e.ts.Close()
		svc.Close()
		tr.CloseIdleConnections()
		h2.CloseIdleConnections()
	})
	return e
}

// bash is a StartRequest running script under bash -c with the marker
// in its environment, stdin /dev/null.
func bash(marker, script string) *processpb.StartRequest {
	no := false
	return &processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", script},
		Envs: map[string]string{proctest.MarkerEnv: marker}}, Stdin: &no}
}

// run is what one stream carried.
type run struct {
	pid        uint32
	stdout     bytes.Buffer
	stderr     bytes.Buffer
	end        *processpb.ProcessEvent_EndEvent
	keepalives int
	events     []string // the kinds, in order
	err        error
}

// collect reads a Start or Connect stream to its end.
func collect[T interface {
	GetEvent() *processpb.ProcessEvent
}](s interface {
	Receive() bool
	Msg() T
	Err() error
}) *run {
	r := &run{}
	for s.Receive() {
		ev := s.Msg().GetEvent()
		switch e := ev.GetEvent().(type) {
		case *processpb.ProcessEvent_Start:
			r.pid = e.Start.GetPid()
			r.events = append(r.events, "start")
		case *processpb.ProcessEvent_Data:
			r.stdout.Write(e.Data.GetStdout())
			r.stderr.Write(e.Data.GetStderr())
			r.events = append(r.events, "data")
		case *processpb.ProcessEvent_Keepalive:
			r.keepalives++
			r.events = append(r.events, "keepalive")
		case *processpb.ProcessEvent_End:
			r.end = e.End
			r.events = append(r.events, "end")
		}
	}
	r.err = s.Err()
	return r
}

// awaitStart reads a stream up to its start event and returns the pid.
func awaitStart[T interface {
	GetEvent() *processpb.ProcessEvent
}](t *testing.T, s interface {
	Receive() bool
	Msg() T
	Err() error
}) uint32 {
	t.Helper()
	if !s.Receive() {
		t.Fatalf("stream ended before the start event: %v", s.Err())
	}
	st := s.Msg().GetEvent().GetStart()
	if st == nil {
		t.Fatalf("first event %v, want start", s.Msg().GetEvent())
	}
	return st.GetPid()
}

// awaitData reads a stream until its stdout so far holds want.
func awaitData[T interface {
	GetEvent() *processpb.ProcessEvent
}](t *testing.T, s interface {
	Receive() bool
	Msg() T
	Err() error
}, want string) {
	t.Helper()
	var got bytes.Buffer
	for !strings.Contains(got.String(), want) {
		if !s.Receive() {
			t.Fatalf("stream ended before %q (stdout %q): %v", want, got.String(), s.Err())
		}
		got.Write(s.Msg().GetEvent().GetData().GetStdout())
	}
}

func code(err error) connect.Code {
	return connect.CodeOf(err)
}

func pidSel(pid uint32) *processpb.ProcessSelector {
	return &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
}

func tagSel(tag string) *processpb.ProcessSelector {
	return &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Tag{Tag: tag}}
}

// listed reports whether List holds pid.
func (e *env) listed(pid uint32) (*processpb.ProcessInfo, bool) {
	e.t.Helper()
	resp, err := e.client.List(context.Background(), connect.NewRequest(&processpb.ListRequest{}))
	if err != nil {
		e.t.Fatalf("List: %v", err)
	}
	for _, p := range resp.Msg.GetProcesses() {
		if p.GetPid() == pid {
			return p, true
		}
	}
	return nil, false
}

func TestStartStreamsOutputAndEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	for _, tc := range []struct {
		name   string
		client processpbconnect.ProcessClient
	}{
		{"proto", e.client}, // binary protobuf
		{"json", e.json},    // Connect JSON, the JS SDK's codec
		{"grpc", e.grpc},    // gRPC, h2c
		{"grpc-web", e.grpcWeb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := collect(started(e.t)(tc.client.Start(context.Background(),
				connect.NewRequest(bash(marker, `echo out; echo err >&2; printf '\xff\x00'; exit 3`)))))
			if r.err != nil {
				t.Fatalf("stream error: %v", r.err)
			}
			if r.events[0] != "start" || r.events[len(r.events)-1] != "end" || r.pid == 0 {
				t.Errorf("events %v (pid %d), want start first and end last", r.events, r.pid)
			}
			if got := r.stdout.String(); got != "out\n\xff\x00" {
				t.Errorf("stdout %q, want the raw bytes %q", got, "out\n\xff\x00")
			}
			if got := r.stderr.String(); got != "err\n" {
				t.Errorf("stderr %q", got)
			}
			want := "exit status 3"
			if r.end.GetExitCode() != 3 || !r.end.GetExited() || r.end.GetStatus() != want || r.end.GetError() != want {
				t.Errorf("end %v, want exit code 3, exited, status and error %q", r.end, want)
			}
		})
	}
}

type (
	startStream   = *connect.ServerStreamForClient[processpb.StartResponse]
	connectStream = *connect.ServerStreamForClient[processpb.ConnectResponse]
)

// started and connected fail the test when opening a stream failed.
func started(t *testing.T) func(startStream, error) startStream { return ok[startStream](t) }

func connected(t *testing.T) func(connectStream, error) connectStream { return ok[connectStream](t) }

func ok[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestStartRunsArgsExactlyWithEnvAndCwd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	req := &processpb.StartRequest{Process: &processpb.ProcessConfig{
		Cmd: "printf", Args: []string{"%s|%s|", "a b; $(id)", "it's"}, Cwd: &dir}}
	r := collect(started(t)(e.client.Start(context.Background(), connect.NewRequest(req))))
	if got, want := r.stdout.String(), "a b; $(id)|it's|"; got != want || r.end.GetExitCode() != 0 {
		t.Errorf("stdout %q end %v, want %q and exit 0: args reach the program untouched", got, r.end, want)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip(err)
	}
	for _, cwd := range []*string{nil, ptr("~"), ptr("~/.")} {
		req := bash("", `pwd -P`)
		req.Process.Cwd = cwd // none, or "~" and "~/...": the home, as in envd
		r = collect(started(t)(e.client.Start(context.Background(), connect.NewRequest(req))))
		want, _ := filepath.EvalSymlinks(home)
		if got := strings.TrimSpace(r.stdout.String()); got != want {
			t.Errorf("cwd %v: pwd %q, want the home %q", cwd, got, want)
		}
	}
	req = bash("", `echo "$FOO:$PWD:$$"`)
	req.Process.Envs = map[string]string{"FOO": "bar"}
	req.Process.Cwd = &dir
	r = collect(started(t)(e.client.Start(context.Background(), connect.NewRequest(req))))
	if got, want := r.stdout.String(), fmt.Sprintf("bar:%s:%d\n", dir, r.pid); got != want {
		t.Errorf("stdout %q, want %q: envs, cwd, and the pid is the program's", got, want)
	}
	// The program is the process, as in envd: no shell of corral's runs
	// between it and the server.
	req = bash("", `echo "$PPID"`)
	r = collect(started(t)(e.client.Start(context.Background(), connect.NewRequest(req))))
	if got, want := strings.TrimSpace(r.stdout.String()), strconv.Itoa(os.Getpid()); got != want {
		t.Errorf("the program's parent is %s, want the server %s", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

func TestErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	no := false
	missing := "/nonexistent/dir"
	startErr := func(req *processpb.StartRequest, hdr ...string) error {
		r := connect.NewRequest(req)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header().Set(hdr[i], hdr[i+1])
		}
		s, err := e.client.Start(ctx, r)
		if err != nil {
			return err
		}
		defer s.Close()
		for s.Receive() {
		}
		return s.Err()
	}
	other := "Basic " + "bm9ib2R5LWVsc2U6" // base64("nobody-else:")
	unaryErr := func(_ any, err error) error { return err }
	for _, tc := range []struct {
		name string
		err  error
		want connect.Code
		text string
	}{
		// no process config at all
		{"no process", startErr(&processpb.StartRequest{}), connect.CodeInvalidArgument, "process is required"},
		// an empty command
		{"empty cmd", startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{}}), connect.CodeInvalidArgument, "cmd is empty"},
		// a PTY larger than a terminal may be
		{"pty too large", startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "true"},
			Pty: &processpb.PTY{Size: &processpb.PTY_Size{Cols: 5000, Rows: 10}}}),
			connect.CodeInvalidArgument, "cols and rows"},
		// a program found nowhere in PATH: nothing starts
		{"no such program", startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "corral-no-such-program-xyz"}, Stdin: &no}),
			connect.CodeInvalidArgument, "no such program"},
		// a program path that does not exist: named, not bash
		{"missing program path", startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/nonexistent/prog"}, Stdin: &no}),
			connect.CodeInvalidArgument, `"/nonexistent/prog"`},
		// a program path that is a directory
		{"directory as program", startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/"}, Stdin: &no}),
			connect.CodeInvalidArgument, `"/" is not an executable file`},
		// a working directory that does not exist
		{"bad cwd", startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "true", Cwd: &missing}, Stdin: &no}),
			connect.CodeInvalidArgument, missing},
		// a bad variable name
		{"bad env", startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "true",
			Envs: map[string]string{"A=B": "x"}}}), connect.CodeInvalidArgument, "A=B"},
		// another user than the one commands run as
		{"other user", startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "true"}}, "Authorization", other),
			connect.CodeInvalidArgument, `user "nobody-else" does not exist`},
		// no process to resize
		{"update", unaryErr(e.client.Update(ctx, connect.NewRequest(&processpb.UpdateRequest{Process: pidSel(1)}))),
			connect.CodeNotFound, "process with pid 1 not found"},
		// unknown pid
		{"signal unknown", unaryErr(e.client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{
			Process: pidSel(1), Signal: processpb.Signal_SIGNAL_SIGKILL}))), connect.CodeNotFound, "process with pid 1 not found"},
		// unknown tag
		{"input unknown tag", unaryErr(e.client.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{
			Process: tagSel("nope"), Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("x")}}}))),
			connect.CodeNotFound, `process with tag "nope" not found`},
		// no selector
		{"close no selector", unaryErr(e.client.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{}))),
			connect.CodeInvalidArgument, "selector is required"},
		// a signal other than SIGTERM and SIGKILL
		{"signal unspecified", unaryErr(e.client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{
			Process: pidSel(1)}))), connect.CodeUnimplemented, "SIGNAL_UNSPECIFIED"},
	} {
		if code(tc.err) != tc.want || tc.err == nil || !strings.Contains(tc.err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v mentioning %q", tc.name, tc.err, tc.want, tc.text)
		}
	}
	// The user commands run as may be named.
	if u, err := user.Current(); err == nil {
		self := "Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username+":"))
		if err := startErr(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "true"}, Stdin: &no},
			"Authorization", self); err != nil {
			t.Errorf("Start as %s, the server's own user: %v", u.Username, err)
		}
	}
	// Connect to an unknown process.
	s, err := e.client.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: pidSel(1)}))
	if err == nil {
		for s.Receive() {
		}
		err = s.Err()
		s.Close()
	}
	if code(err) != connect.CodeNotFound {
		t.Errorf("Connect to pid 1: %v, want not_found", err)
	}
}

func TestSignalKillsWholeTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		sig  processpb.Signal
		want string
	}{
		{"kill", processpb.Signal_SIGNAL_SIGKILL, "signal: killed"},     // the whole tree at once
		{"term", processpb.Signal_SIGNAL_SIGTERM, "signal: terminated"}, // SIGTERM to every member
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, marker := proctest.Marker(t)
			req := bash(marker, `setsid sleep 300 & sleep 300 & echo ready; wait`)
			tag := "tree-" + tc.name
			req.Tag = &tag
			s := started(t)(e.client.Start(context.Background(), connect.NewRequest(req)))
			defer s.Close()
			pid := awaitStart(t, s)
			awaitData(t, s, "ready")
			info, ok := e.listed(pid)
			if !ok || info.GetTag() != tag || info.GetConfig().GetCmd() != "/bin/bash" {
				t.Fatalf("List: %v (found %v), want pid %d with tag %q", info, ok, pid, tag)
			}
			waitProcs(t, marker, 3) // bash, the setsid sleep, the sleep
			_, err := e.client.SendSignal(context.Background(), connect.NewRequest(&processpb.SendSignalRequest{
				Process: tagSel(tag), Signal: tc.sig, Descendants: true}))
			if err != nil {
				t.Fatalf("SendSignal: %v", err)
			}
			// SendSignal returns once the tree is gone: no grace for the scan.
			if left := proctest.Survivors(marker); len(left) > 0 {
				t.Errorf("after SendSignal returned: %v", left)
			}
			proctest.NoSurvivors(t, marker, time.Second)
			r := collect(s)
			if r.end.GetExitCode() != -1 || r.end.GetExited() || r.end.GetStatus() != tc.want {
				t.Errorf("end %v, want exit code -1, not exited, status %q", r.end, tc.want)
			}
			if _, ok := e.listed(pid); ok {
				t.Errorf("pid %d still listed after the kill", pid)
			}
			if _, err := e.client.SendSignal(context.Background(), connect.NewRequest(&processpb.SendSignalRequest{
				Process: pidSel(pid), Signal: tc.sig})); code(err) != connect.CodeNotFound {
				t.Errorf("a second SendSignal: %v, want not_found (the SDK's kill() then returns false)", err)
			}
		})
	}
}

func TestInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, marker := proctest.Marker(t)
	req := bash(marker, `while read -r l; do echo "got $l"; done; echo eof`)
	req.Stdin = nil // unset: a stdin pipe, as envd defaults for old SDKs
	s := started(t)(e.json.Start(ctx, connect.NewRequest(req)))
	defer s.Close()
	pid := awaitStart(t, s)
	if _, err := e.json.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: pidSel(pid),
		Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("one\n")}}})); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	awaitData(t, s, "got one\n")
	in := e.client.StreamInput(ctx)
	for _, m := range []*processpb.StreamInputRequest{
		{Event: &processpb.StreamInputRequest_Start{Start: &processpb.StreamInputRequest_StartEvent{Process: pidSel(pid)}}},
		{Event: &processpb.StreamInputRequest_Keepalive{Keepalive: &processpb.StreamInputRequest_KeepAlive{}}},
		{Event: &processpb.StreamInputRequest_Data{Data: &processpb.StreamInputRequest_DataEvent{
			Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("two\n")}}}}},
		{Event: &processpb.StreamInputRequest_Data{Data: &processpb.StreamInputRequest_DataEvent{
			Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("three\n")}}}}},
	} {
		if err := in.Send(m); err != nil {
			t.Fatalf("StreamInput send: %v", err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatalf("StreamInput: %v", err)
	}
	awaitData(t, s, "got three\n")
	if _, err := e.client.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: pidSel(pid)})); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	r := collect(s)
	if r.stdout.String() != "eof\n" || r.end.GetExitCode() != 0 {
		t.Errorf("after CloseStdin: stdout %q end %v, want eof and exit 0", r.stdout.String(), r.end)
	}

	// stdin false is /dev/null, and input is refused.
	s2 := started(t)(e.client.Start(ctx, connect.NewRequest(bash(marker, `cat; echo done; sleep 300`))))
	defer s2.Close()
	pid2 := awaitStart(t, s2)
	awaitData(t, s2, "done\n")
	_, err := e.client.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: pidSel(pid2),
		Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("x")}}}))
	if code(err) != connect.CodeInvalidArgument {
		t.Errorf("SendInput without a stdin pipe: %v, want invalid_argument", err)
	}
	_, err = e.client.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: pidSel(pid2),
		Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Pty{Pty: []byte("x")}}}))
	if code(err) != connect.CodeInvalidArgument {
		t.Errorf("pty input to a process without a pty: %v, want invalid_argument", err)
	}
	e.client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: pidSel(pid2), Signal: processpb.Signal_SIGNAL_SIGKILL}))
	proctest.NoSurvivors(t, marker, time.Second)
}

// A client gone after the start event leaves the process running, as in
// envd; a late Connect replays what the rings hold, then follows.
func TestDisconnectThenConnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	req := bash(marker, `echo early; read -r x; echo "late $x"`)
	yes := true
	req.Stdin = &yes
	tag := "reattach"
	req.Tag = &tag
	ctx, cancel := context.WithCancel(context.Background())
	s := started(t)(e.client.Start(ctx, connect.NewRequest(req)))
	pid := awaitStart(t, s)
	awaitData(t, s, "early")
	cancel()
	s.Close()
	time.Sleep(200 * time.Millisecond) // let the server see the stream go
	if _, ok := e.listed(pid); !ok {
		t.Fatalf("pid %d not listed after its Start stream went: the process must keep running", pid)
	}
	c := connected(t)(e.json.Connect(context.Background(), connect.NewRequest(&processpb.ConnectRequest{Process: tagSel(tag)})))
	defer c.Close()
	if got := awaitStart(t, c); got != pid {
		t.Errorf("Connect start pid %d, want %d", got, pid)
	}
	awaitData(t, c, "early\n") // the backlog
	if _, err := e.client.SendInput(context.Background(), connect.NewRequest(&processpb.SendInputRequest{Process: pidSel(pid),
		Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("now\n")}}})); err != nil {
		t.Fatal(err)
	}
	r := collect(c)
	if r.stdout.String() != "late now\n" || r.end.GetExitCode() != 0 {
		t.Errorf("Connect: stdout %q end %v, want the live output and exit 0", r.stdout.String(), r.end)
	}
	// An exited process stays reachable by Connect: its backlog and end.
	c2 := connected(t)(e.client.Connect(context.Background(), connect.NewRequest(&processpb.ConnectRequest{Process: pidSel(pid)})))
	defer c2.Close()
	r = collect(c2)
	if r.stdout.String() != "early\nlate now\n" || r.end.GetExitCode() != 0 {
		t.Errorf("Connect after the end: stdout %q end %v", r.stdout.String(), r.end)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}

// A Start whose stream is gone before the start event kills the process.
// Not parallel: it sets the package's hook.
func TestCancelBeforeStartKills(t *testing.T) {
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	reached := make(chan struct{})
	envd.SetStartedHook(func(sctx context.Context) {
		once.Do(func() { close(reached) })
		<-sctx.Done() // hold the start event until the client went
	})
	defer envd.SetStartedHook(nil)
	done := make(chan error, 1)
	go func() {
		s, err := e.client.Start(ctx, connect.NewRequest(bash(marker, `setsid sleep 300 & sleep 300`)))
		if err == nil {
			for s.Receive() {
			}
			err = s.Err()
			s.Close()
		}
		done <- err
	}()
	<-reached
	waitProcs(t, marker, 3)
	cancel()
	if err := <-done; code(err) != connect.CodeCanceled {
		t.Errorf("stream: %v, want canceled", err)
	}
	proctest.NoSurvivors(t, marker, 5*time.Second)
	// The client's stream ends at its cancel; the server's kill, which ends
	// the job, may finish a moment after the processes are gone. Until it
	// has, List may still show the process; then never again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := e.client.List(context.Background(), connect.NewRequest(&processpb.ListRequest{}))
		if err == nil && len(resp.Msg.GetProcesses()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("List 5 s after the cancelled start: %v %v, want none", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitProcs waits until n processes carry the marker.
func waitProcs(t *testing.T, marker string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second) // a bound on a loaded machine, not a speed
	for len(proctest.Survivors(marker)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d processes up, have %v", n, proctest.Survivors(marker))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConcurrentStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r := collect(started(t)(e.client.Start(context.Background(), connect.NewRequest(
				bash("", fmt.Sprintf(`seq %d 5000; echo done-%d >&2`, i, i))))))
			want := seqText(i, 5000)
			switch {
			case r.err != nil:
				errs <- r.err
			case r.stdout.String() != want || r.stderr.String() != fmt.Sprintf("done-%d\n", i) || r.end.GetExitCode() != 0:
				errs <- fmt.Errorf("stream %d: %d stdout bytes (want %d), stderr %q, end %v", i, r.stdout.Len(), len(want), r.stderr.String(), r.end)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func seqText(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// A client slower than the command skips what the ring dropped, and the
// stream says where and how much; the command is never slowed and the
// server keeps only the ring.
func TestSlowClientSkipsCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withCapture(64<<10))
	const total = 64 << 20 // well past what the sockets buffer
	s := started(t)(e.client.Start(context.Background(), connect.NewRequest(bash("", fmt.Sprintf(`head -c %d /dev/zero`, total)))))
	defer s.Close()
	awaitStart(t, s)
	time.Sleep(time.Second) // the command ends while the client sleeps
	r := collect(s)
	if r.end.GetExitCode() != 0 {
		t.Fatalf("end %v", r.end)
	}
	out := r.stdout.Bytes()
	zeros := bytes.Count(out, []byte{0})
	var skipped int64
	for _, line := range strings.Split(string(bytes.ReplaceAll(out, []byte{0}, nil)), "\n") {
		var n int64
		if _, err := fmt.Sscanf(line, "[corral: %d bytes of stdout were skipped here", &n); err == nil {
			skipped += n
		}
	}
	if skipped == 0 || int64(zeros)+skipped != total {
		t.Errorf("received %d bytes, markers say %d skipped: want some skipped and the sum %d", zeros, skipped, total)
	}
}

func TestKeepaliveAndTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	req := connect.NewRequest(bash(marker, `sleep 1.5; setsid sleep 300 & sleep 300`))
	req.Header().Set("Keepalive-Ping-Interval", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // Connect-Timeout-Ms: the process's lifetime
	defer cancel()
	r := collect(started(t)(e.client.Start(ctx, req)))
	if r.keepalives == 0 {
		t.Errorf("events %v: no keepalive after 1 s of silence", r.events)
	}
	if r.end == nil && code(r.err) != connect.CodeDeadlineExceeded {
		t.Errorf("stream: end %v err %v, want an end or deadline_exceeded", r.end, r.err)
	}
	proctest.NoSurvivors(t, marker, 3*time.Second)
}

// TestStartAsUser: envd's Basic user names the user the process runs as
// when corral runs as root: its IDs and its home as the default cwd.
func TestStartAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a process as another user needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	t.Parallel()
	e := newEnv(t)
	r := connect.NewRequest(bash("", `id -un; pwd -P; echo "$HOME"`))
	r.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("nobody:")))
	got := collect(started(t)(e.client.Start(context.Background(), r)))
	wantDir := "/"
	if fi, err := os.Stat(nobody.HomeDir); err == nil && fi.IsDir() {
		wantDir, _ = filepath.EvalSymlinks(nobody.HomeDir)
	}
	if want := "nobody\n" + wantDir + "\n" + nobody.HomeDir + "\n"; got.stdout.String() != want {
		t.Errorf("as nobody: %q (stderr %q), want %q", got.stdout.String(), got.stderr.String(), want)
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withToken("tok-1"))
	ctx := context.Background()
	_, err := e.client.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
	if code(err) != connect.CodeUnauthenticated {
		t.Errorf("List without X-Access-Token: %v, want unauthenticated", err)
	}
	req := connect.NewRequest(&processpb.ListRequest{})
	req.Header().Set("X-Access-Token", "wrong")
	if _, err := e.client.List(ctx, req); code(err) != connect.CodeUnauthenticated {
		t.Errorf("List with a wrong token: %v, want unauthenticated", err)
	}
	req.Header().Set("X-Access-Token", "tok-1")
	if _, err := e.client.List(ctx, req); err != nil {
		t.Errorf("List with the token: %v", err)
	}
	// Browsers: a cross-site request, and a DNS-rebound host name.
	for _, h := range [][2]string{{"Sec-Fetch-Site", "cross-site"}, {"Host", "evil.example"}} {
		req, _ := http.NewRequest("POST", e.ts.URL+"/process.Process/List", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Access-Token", "tok-1")
		req.Header.Set(h[0], h[1])
		if h[0] == "Host" {
			req.Host = h[1]
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("List with %s: %s: %d, want 403", h[0], h[1], resp.StatusCode)
		}
	}
	resp, err := http.Get(e.ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Envd-Version") != envd.Version {
		t.Errorf("GET /health without a token: %d, version %q; want 204 and %q", resp.StatusCode,
			resp.Header.Get("X-Envd-Version"), envd.Version)
	}
}

// A tag names the job's session: variables a command of that session
// exported apply beneath envs.
func TestTagIsSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.sup.Run(context.Background(), supervisor.Request{Command: "export FOO=from-session", Session: "s1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tag, envFOO, want string
	}{
		{"s1", "", "from-session"}, // the session's variable
		{"s1", "mine", "mine"},     // envs on top
		{"other", "", ""},          // another session has none
	} {
		req := bash("", `echo "$FOO"`)
		req.Tag = &tc.tag
		if tc.envFOO != "" {
			req.Process.Envs = map[string]string{"FOO": tc.envFOO}
		}
		r := collect(started(t)(e.client.Start(context.Background(), connect.NewRequest(req))))
		if got := strings.TrimSpace(r.stdout.String()); got != tc.want {
			t.Errorf("tag %q envs FOO=%q: $FOO %q, want %q", tc.tag, tc.envFOO, got, tc.want)
		}
	}
}

// TestRunAsBoundsBasicUser serves as root with commands run as nobody
// (serve --run-as nobody): an envd Basic user other than nobody is refused,
// root included, unless the operator allowed it (--allow-user), and then
// the command runs as that user.
func TestRunAsBoundsBasicUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a process as another user needs root")
	}
	for _, name := range []string{"nobody", "daemon"} {
		if _, err := user.Lookup(name); err != nil {
			t.Skipf("no user %s: %v", name, err)
		}
	}
	t.Parallel()
	as := func(e *env, name string) (string, error) {
		r := connect.NewRequest(bash("", `id -un`))
		r.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(name+":")))
		s, err := e.client.Start(context.Background(), r)
		if err != nil {
			return "", err
		}
		defer s.Close()
		got := collect(s)
		return got.stdout.String(), got.err
	}
	runAs := func(allow ...string) option {
		return func(_ *envd.Config, c *supervisor.Config) { c.User, c.AllowUsers = "nobody", allow }
	}
	strict, allowing := newEnv(t, runAs()), newEnv(t, runAs("daemon"))
	for _, tc := range []struct {
		name, user string
		e          *env
		want       string // the user it ran as, "" when refused
	}{
		{"the run-as user", "nobody", strict, "nobody\n"},   // the user commands run as anyway
		{"another user", "daemon", strict, ""},              // not listed: refused
		{"root", "root", strict, ""},                        // never root under --run-as
		{"an allowed user", "daemon", allowing, "daemon\n"}, // listed with --allow-user
		{"root, others allowed", "root", allowing, ""},      // still never root
		{"a user not listed", "bin", allowing, ""},          // only those listed
	} {
		got, err := as(tc.e, tc.user)
		switch {
		case tc.want == "" && (code(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.user)):
			t.Errorf("%s: %q, %v; want invalid_argument naming %s", tc.name, got, err, tc.user)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// emulator is corral's terminal emulator, as corral-server gives it
// (supervisor.Config.Emulator).
func emulator(cols, rows int) supervisor.Emulator { return vtemu.New(cols, rows) }
