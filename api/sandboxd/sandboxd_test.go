package sandboxd_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/corral-sh/corral/api/sandboxd"
	"github.com/corral-sh/corral/api/sandboxd/processpb"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
	"github.com/corral-sh/corral/supervisor/vtemu"
)

func TestMain(m *testing.M) {
	if os.Getenv(proctest.HelperEnv) != "" {
		proctest.Main(m)
	}
	if benchServerMain != nil && os.Getenv(benchServerEnv) != "" {
		benchServerMain()
	}
	goleak.VerifyTestMain(m)
}

// benchServerEnv makes this test binary serve as the benchmarks' corral
// (bench_test.go) instead of running tests.
const benchServerEnv = "CORRAL_SANDBOXD_BENCH_SERVER"

// benchServerMain is that server, where the benchmarks are built.
var benchServerMain func()

// env is one test sandboxd: a supervisor, the Service over it on loopback
// (gRPC and REST) and a gRPC client.
type env struct {
	sup    *supervisor.Supervisor
	svc    *sandboxd.Service
	root   string
	client processpb.ProcessServiceClient
	rest   string // http://host:port
}

func newEnv(t *testing.T, tokens ...string) *env {
	t.Helper()
	sup, err := supervisor.New(supervisor.Config{DataDir: t.TempDir(), Grace: 200 * time.Millisecond, Emulator: emulator})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	svc, err := sandboxd.New(sandboxd.Config{Supervisor: sup, RootDir: root, Tokens: tokens,
		Environ: func() []string { return []string{"SANDBOX_ID=s-1", "SANDBOX_API_TOKEN=x", "OTHER=y"} }})
	if err != nil {
		sup.Close()
		t.Fatal(err)
	}
	g := svc.GRPCServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { g.Serve(ln); close(served) }()
	rest := newREST(t, svc)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		sup.Close() // kills every job, so every stream ends
		g.Stop()
		<-served
		svc.Close()
	})
	return &env{sup: sup, svc: svc, root: root, client: processpb.NewProcessServiceClient(conn), rest: rest}
}

// bash is a ProcessConfig running script under bash -c with the marker in
// its environment.
func bash(marker, script string) *processpb.ProcessConfig {
	return &processpb.ProcessConfig{Command: []string{"/bin/bash", "-c", script},
		EnvVars: map[string]string{proctest.MarkerEnv: marker}}
}

func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func TestExecute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	resp, err := e.client.Execute(t.Context(), &processpb.ExecuteRequest{Config: bash(marker, "echo out; echo err >&2; pwd; exit 3")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.Stdout), "out\n"+e.root+"\n"; got != want {
		t.Errorf("stdout %q, want %q (the root is the default cwd)", got, want)
	}
	if string(resp.Stderr) != "err\n" || resp.ExitCode != 3 {
		t.Errorf("stderr %q exit %d, want \"err\\n\" 3", resp.Stderr, resp.ExitCode)
	}
	// argv exactly, no shell: a program name is looked up in PATH.
	resp, err = e.client.Execute(t.Context(), &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{
		Command: []string{"printf", "%s|", "a b", "$HOME"}, EnvVars: map[string]string{"X": "1"}}})
	if err != nil || string(resp.Stdout) != "a b|$HOME|" {
		t.Errorf("argv: %q, %v; want \"a b|$HOME|\"", resp.GetStdout(), err)
	}
}

// TestExecuteBounded: a flood comes back as corral's head view with its
// marker, never whole.
func TestExecuteBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	resp, err := e.client.Execute(t.Context(), &processpb.ExecuteRequest{Config: bash(marker,
		"head -c 20000000 /dev/zero | tr '\\0' a; echo; seq 1 100000 >&2")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Stdout); n > 96<<10+512 || !strings.Contains(string(resp.Stdout), "[truncated: ") {
		t.Errorf("stdout %d bytes, tail %q: want at most 96 KiB and the marker", n, tail(resp.Stdout))
	}
	if !strings.Contains(string(resp.Stdout), "kept 98304 bytes of a single 20000000-byte line") {
		t.Errorf("the marker does not count the whole line (20000000 bytes): %q", tail(resp.Stdout))
	}
	if n := len(resp.Stderr); n > 96<<10+512 || !strings.HasPrefix(string(resp.Stderr), "[truncated: ") || !strings.HasSuffix(string(resp.Stderr), "100000\n") {
		t.Errorf("stderr %d bytes, head %q: want its tail with the marker first", n, resp.Stderr[:min(len(resp.Stderr), 200)])
	}
}

func tail(b []byte) string { return string(b[max(0, len(b)-400):]) }

// TestExecuteDeadline: the gRPC deadline is the command's timeout; the
// whole tree, a setsid daemon included, dies at it.
func TestExecuteDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.client.Execute(ctx, &processpb.ExecuteRequest{Config: bash(marker, "setsid sleep 300 & sleep 300")})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
	proctest.NoSurvivors(t, marker, 3*time.Second)
	t.Logf("deadline passed after %v", time.Since(start))
}

// start runs cfg with Start and returns the stream and the process id.
func start(t *testing.T, ctx context.Context, c processpb.ProcessServiceClient, cfg *processpb.ProcessConfig) (processpb.ProcessService_StartClient, int32) {
	t.Helper()
	st, err := c.Start(ctx, &processpb.StartRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || ev.GetInit() == nil {
		t.Fatalf("first event %v, %v; want init", ev, err)
	}
	return st, ev.GetInit().GetProcessId()
}

// drain reads a Start stream to its end.
func drain(st processpb.ProcessService_StartClient) (stdout, stderr string, exit *processpb.ExitEvent, err error) {
	var o, e bytes.Buffer
	for {
		ev, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return o.String(), e.String(), exit, err
		}
		switch v := ev.GetEvent().(type) {
		case *processpb.StartResponse_Stdout:
			o.Write(v.Stdout)
		case *processpb.StartResponse_Stderr:
			e.Write(v.Stderr)
		case *processpb.StartResponse_Exit:
			exit = v.Exit
		}
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st, id := start(t, t.Context(), e.client, bash(marker, "echo out; echo err >&2; exit 7"))
	if id < 1 {
		t.Errorf("process_id %d, want 1 or more", id)
	}
	out, errOut, exit, err := drain(st)
	if err != nil || out != "out\n" || errOut != "err\n" || exit.GetExitCode() != 7 {
		t.Errorf("stdout %q stderr %q exit %v err %v; want out, err, 7", out, errOut, exit, err)
	}
	// The stream ended: the id names nothing any more.
	_, err = e.client.WriteStdin(t.Context(), &processpb.WriteStdinRequest{ProcessId: id, Payload: &processpb.WriteStdinRequest_Input{Input: []byte("x")}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("WriteStdin after the end: %v, want NotFound", err)
	}
}

func TestWriteStdin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st, id := start(t, t.Context(), e.client, bash(marker, "cat; echo done"))
	for _, in := range []string{"hello ", "world\n"} {
		if _, err := e.client.WriteStdin(t.Context(), &processpb.WriteStdinRequest{ProcessId: id,
			Payload: &processpb.WriteStdinRequest_Input{Input: []byte(in)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.client.WriteStdin(t.Context(), &processpb.WriteStdinRequest{ProcessId: id,
		Payload: &processpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}); err != nil {
		t.Fatal(err)
	}
	out, _, exit, err := drain(st)
	if err != nil || out != "hello world\ndone\n" || exit.GetExitCode() != 0 {
		t.Errorf("stdout %q exit %v err %v; want the input, done, 0", out, exit, err)
	}
}

// TestSendSignal: SIGTERM and SIGKILL end the whole tree, a setsid child
// that ignores SIGTERM included; SIGINT reaches every member and kills
// nothing by itself.
func TestSendSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []processpb.Signal{processpb.Signal_SIGNAL_SIGTERM, processpb.Signal_SIGNAL_SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			_, marker := proctest.Marker(t)
			st, id := start(t, t.Context(), e.client, bash(marker,
				"setsid bash -c 'trap \"\" TERM; sleep 300' & echo up; sleep 300"))
			if ev, err := st.Recv(); err != nil || string(ev.GetStdout()) != "up\n" {
				t.Fatalf("%v %v, want up", ev, err)
			}
			proctest.AtLeast(marker, 3, 5*time.Second, nil)
			if _, err := e.client.SendSignal(t.Context(), &processpb.SendSignalRequest{ProcessId: id, Signal: sig}); err != nil {
				t.Fatal(err)
			}
			proctest.NoSurvivors(t, marker, 2*time.Second)
			_, _, exit, err := drain(st)
			if err != nil || exit.GetExitCode() != -1 {
				t.Errorf("exit %v err %v, want -1", exit, err)
			}
		})
	}
	t.Run("SIGINT", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		_, marker := proctest.Marker(t)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		// setsid -f, not &: bash starts a background command with SIGINT
		// ignored, and a signal ignored at entry cannot be trapped.
		st, id := start(t, ctx, e.client, bash(marker,
			"setsid -f bash -c 'trap \"echo child-int\" INT; while :; do sleep 0.1; done'; trap 'echo leader-int' INT; echo up; sleep 300 & wait; wait"))
		if ev, err := st.Recv(); err != nil || string(ev.GetStdout()) != "up\n" {
			t.Fatalf("%v %v, want up", ev, err)
		}
		proctest.AtLeast(marker, 4, 5*time.Second, nil)
		if _, err := e.client.SendSignal(t.Context(), &processpb.SendSignalRequest{ProcessId: id, Signal: processpb.Signal_SIGNAL_SIGINT}); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		for !strings.Contains(got.String(), "child-int") || !strings.Contains(got.String(), "leader-int") {
			ev, err := st.Recv()
			if err != nil {
				t.Fatalf("%v after %q; want both traps to run", err, got.String())
			}
			got.Write(ev.GetStdout())
		}
		if _, err := e.client.SendSignal(t.Context(), &processpb.SendSignalRequest{ProcessId: id, Signal: processpb.Signal_SIGNAL_SIGKILL}); err != nil {
			t.Fatal(err)
		}
		proctest.NoSurvivors(t, marker, 2*time.Second)
	})
}

// TestNotFound: an id nobody started, and another client's, are NOT_FOUND.
func TestNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "token-a", "token-b")
	a, b := withToken(t.Context(), "token-a"), withToken(t.Context(), "token-b")
	_, marker := proctest.Marker(t)
	st, id := start(t, a, e.client, bash(marker, "cat"))
	for _, tc := range []struct {
		ctx context.Context
		id  int32
	}{
		{a, id + 1000}, // never started
		{b, id},        // another token's
	} {
		_, err := e.client.WriteStdin(tc.ctx, &processpb.WriteStdinRequest{ProcessId: tc.id, Payload: &processpb.WriteStdinRequest_Input{Input: []byte("x")}})
		if status.Code(err) != codes.NotFound {
			t.Errorf("WriteStdin(%d): %v, want NotFound", tc.id, err)
		}
		_, err = e.client.SendSignal(tc.ctx, &processpb.SendSignalRequest{ProcessId: tc.id, Signal: processpb.Signal_SIGNAL_SIGKILL})
		if status.Code(err) != codes.NotFound {
			t.Errorf("SendSignal(%d): %v, want NotFound", tc.id, err)
		}
	}
	// No token, or a wrong one: Unauthenticated.
	for _, ctx := range []context.Context{t.Context(), withToken(t.Context(), "token-c")} {
		_, err := e.client.Execute(ctx, &processpb.ExecuteRequest{Config: bash(marker, "true")})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("Execute without a valid token: %v, want Unauthenticated", err)
		}
	}
	if _, err := e.client.WriteStdin(a, &processpb.WriteStdinRequest{ProcessId: id, Payload: &processpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, exit, err := drain(st); err != nil || exit.GetExitCode() != 0 {
		t.Errorf("exit %v %v, want 0", exit, err)
	}
}

func TestRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	os.Symlink("/etc", e.root+"/out")
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"pty too wide", func() error {
			st, err := e.client.Start(t.Context(), &processpb.StartRequest{Config: bash("", "true"), Pty: &processpb.PTY{Cols: 1 << 31, Rows: 24}})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		}, codes.InvalidArgument},
		{"resize of nothing", func() error {
			_, err := e.client.ResizeTTY(t.Context(), &processpb.ResizeTTYRequest{ProcessId: 1000, Cols: 80, Rows: 24})
			return err
		}, codes.NotFound},
		{"no command", func() error {
			_, err := e.client.Execute(t.Context(), &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{}})
			return err
		}, codes.InvalidArgument},
		{"cwd ..", func() error {
			cwd := "../"
			_, err := e.client.Execute(t.Context(), &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: []string{"true"}, Cwd: &cwd}})
			return err
		}, codes.PermissionDenied},
		{"cwd symlink out", func() error {
			cwd := "out"
			_, err := e.client.Execute(t.Context(), &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: []string{"true"}, Cwd: &cwd}})
			return err
		}, codes.PermissionDenied},
		{"unspecified signal", func() error {
			_, err := e.client.SendSignal(t.Context(), &processpb.SendSignalRequest{ProcessId: 1})
			return err
		}, codes.InvalidArgument},
	} {
		if err := tc.call(); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// emulator is corral's terminal emulator, as corral-server gives it
// (supervisor.Config.Emulator).
func emulator(cols, rows int) supervisor.Emulator { return vtemu.New(cols, rows) }
