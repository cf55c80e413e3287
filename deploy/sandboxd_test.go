package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"
)

// The tests in this file drive `corral serve --sandboxd --sandboxd-rest`
// with agent-sandbox v1.0.1's own generated gRPC client and with curl, as
// a client of a real sandboxd would.
//
// Not its SDK (clients/go/sandbox): with Runtime: RuntimeSandboxd it cannot
// drive a given address without a cluster. New builds a Kubernetes helper
// (in-cluster config or a kubeconfig), Open creates a SandboxClaim and waits
// for its pod, and the gRPC target of its commands is set only by the pod
// port-forward (podtunnel.go's SetGRPCTarget); APIURL's direct strategy
// gives a base URL but no gRPC target, so Commands.Run fails with
// ErrNotReady ("sandboxd gRPC endpoint not connected", connector.go).
//
// One token per `corral serve` (--token or --token-file) makes one client;
// that another token's process_id is NOT_FOUND is tested where several
// tokens can be configured, sandboxd.Config.Tokens (api/sandboxd's
// TestNotFound, over the same wire with corral's copy of the proto).

// sandboxd is one running corral serving the sandboxd faces.
type sandboxd struct {
	client processv1.ProcessServiceClient
	rest   string // host:port
	root   string
}

// startSandboxd runs corral serve with the sandboxd faces on loopback, no
// token, and a root of its own.
func startSandboxd(t *testing.T) *sandboxd { return startSandboxdToken(t, "") }

// startSandboxdToken is startSandboxd requiring token (from --token-file),
// or no token when it is "".
func startSandboxdToken(t *testing.T, token string) *sandboxd {
	t.Helper()
	bin := corral(t)
	dir, err := os.MkdirTemp(tmpRoot, "sandboxd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	root := filepath.Join(dir, "workspace")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	auth := []string{"--insecure-no-auth"}
	if token != "" {
		tf := filepath.Join(dir, "token")
		if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = []string{"--token-file", tf}
	}
	args := append([]string{"serve"}, auth...)
	cmd := exec.Command(bin, append(args, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--sandboxd", "127.0.0.1:0", "--sandboxd-rest", "127.0.0.1:0", "--root-dir", root, "--grace", "0.5")...)
	cmd.Env = append(os.Environ(), "CORRAL_CONTAINMENT=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		addrs <- sandboxdAddrs(stderr)
		io.Copy(io.Discard, stderr)
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	var a [2]string
	select {
	case a = <-addrs:
	case <-time.After(60 * time.Second):
		t.Fatal("no sandboxd listening within 60 s")
	}
	if a[0] == "" || a[1] == "" {
		t.Fatalf("corral exited before serving sandboxd: %q", a)
	}
	conn, err := grpc.NewClient(a[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &sandboxd{client: processv1.NewProcessServiceClient(conn), rest: a[1], root: root}
}

// sandboxdAddrs reads corral's JSON log until both sandboxd faces logged
// their addresses (gRPC, REST); "" for one the log ended before.
func sandboxdAddrs(r io.Reader) (a [2]string) {
	sc := bufio.NewScanner(r)
	for (a[0] == "" || a[1] == "") && sc.Scan() {
		var l struct{ Sandboxd, SandboxdRest string }
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			if l.Sandboxd != "" {
				a[0] = l.Sandboxd
			}
			if l.SandboxdRest != "" {
				a[1] = l.SandboxdRest
			}
		}
	}
	return a
}

// sh is a ProcessConfig running script with sh -c, as the SDK's Commands.Run
// does; the marker is in its command line.
func sh(marker, script string) *processv1.ProcessConfig {
	return &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", script + " # " + marker}}
}

func newMarker(t *testing.T) string {
	return fmt.Sprintf("sandboxd-%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid(), time.Now().UnixNano())
}

// noSurvivors fails when a process with marker in its command line is
// still there after within.
func noSurvivors(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(withMarker(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if pids := withMarker(marker); len(pids) > 0 {
		t.Errorf("processes of the tree outlived it by %v: %v", within, pids)
	}
}

// recvAll reads a Start stream to its end.
func recvAll(st grpc.ServerStreamingClient[processv1.StartResponse]) (stdout, stderr string, exit *processv1.ExitEvent, err error) {
	var o, e bytes.Buffer
	for {
		ev, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return o.String(), e.String(), exit, err
		}
		o.Write(ev.GetStdout())
		e.Write(ev.GetStderr())
		if ev.GetExit() != nil {
			exit = ev.GetExit()
		}
	}
}

func startProcess(t *testing.T, ctx context.Context, c processv1.ProcessServiceClient, cfg *processv1.ProcessConfig) (grpc.ServerStreamingClient[processv1.StartResponse], int32) {
	t.Helper()
	st, err := c.Start(ctx, &processv1.StartRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || ev.GetInit() == nil {
		t.Fatalf("first event %v %v, want init", ev, err)
	}
	return st, ev.GetInit().GetProcessId()
}

func TestSandboxdProcessService(t *testing.T) {
	sd := startSandboxd(t)
	c := sd.client
	ctx := t.Context()

	t.Run("Start", func(t *testing.T) {
		m := newMarker(t)
		st, _ := startProcess(t, ctx, c, sh(m, "echo out; echo err >&2; exit 5"))
		out, errOut, exit, err := recvAll(st)
		if err != nil || out != "out\n" || errOut != "err\n" || exit == nil || exit.GetExitCode() != 5 {
			t.Errorf("stdout %q stderr %q exit %v err %v; want out, err, 5", out, errOut, exit, err)
		}
	})
	t.Run("WriteStdin", func(t *testing.T) {
		m := newMarker(t)
		st, id := startProcess(t, ctx, c, sh(m, "tr a-z A-Z"))
		if _, err := c.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("hello\n")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}); err != nil {
			t.Fatal(err)
		}
		out, _, exit, err := recvAll(st)
		if err != nil || out != "HELLO\n" || exit.GetExitCode() != 0 {
			t.Errorf("stdout %q exit %v err %v; want HELLO, 0", out, exit, err)
		}
	})
	t.Run("SendSignalSIGTERM", func(t *testing.T) {
		m := newMarker(t)
		// A setsid child that ignores SIGTERM: sandboxd's kill of one
		// process group would leave it; corral's way down does not.
		st, id := startProcess(t, ctx, c, sh(m, "setsid sh -c 'trap \"\" TERM; while :; do sleep 1; done # "+m+"' & echo up; sleep 300"))
		if ev, err := st.Recv(); err != nil || string(ev.GetStdout()) != "up\n" {
			t.Fatalf("%v %v, want up", ev, err)
		}
		for len(withMarker(m)) < 2 {
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := c.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: id, Signal: processv1.Signal_SIGNAL_SIGTERM}); err != nil {
			t.Fatal(err)
		}
		noSurvivors(t, m, 0) // SendSignal returned once the tree was gone
		_, _, exit, err := recvAll(st)
		if err != nil || exit.GetExitCode() != -1 {
			t.Errorf("exit %v err %v, want -1 (killed by a signal)", exit, err)
		}
	})
	t.Run("PTY", func(t *testing.T) {
		m := newMarker(t)
		st, err := c.Start(ctx, &processv1.StartRequest{Config: sh(m,
			"trap 'echo \"winch:$(stty size)\"' WINCH; stty size; echo to-stderr >&2; read l; echo \"read:$l\"; while :; do sleep 0.1; done"),
			Pty: &processv1.PTY{Cols: 91, Rows: 17}})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := st.Recv()
		if err != nil || ev.GetInit() == nil {
			t.Fatalf("first event %v %v, want init", ev, err)
		}
		id := ev.GetInit().GetProcessId()
		var out strings.Builder
		upTo := func(want string) {
			t.Helper()
			for !strings.Contains(out.String(), want) {
				ev, err := st.Recv()
				if err != nil || ev.GetStderr() != nil || ev.GetExit() != nil {
					t.Fatalf("%v %v after %q; want %q on stdout", ev, err, out.String(), want)
				}
				out.Write(ev.GetStdout())
			}
		}
		upTo("17 91\r\n")     // the size asked
		upTo("to-stderr\r\n") // a terminal's one stream
		if _, err := c.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("typed\r")}}); err != nil {
			t.Fatal(err)
		}
		upTo("read:typed")
		if _, err := c.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: id, Cols: 132, Rows: 43}); err != nil {
			t.Fatal(err)
		}
		upTo("winch:43 132")
		if _, err := c.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: id, Cols: 0, Rows: 43}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("a zero-column resize: %v, want InvalidArgument", err)
		}
		pipe, pipeID := startProcess(t, ctx, c, sh(m, "cat"))
		if _, err := c.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: pipeID, Cols: 80, Rows: 24}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("the resize of a pipe process: %v, want InvalidArgument", err)
		}
		for _, id := range []int32{id, pipeID} {
			if _, err := c.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: id, Signal: processv1.Signal_SIGNAL_SIGKILL}); err != nil {
				t.Fatal(err)
			}
		}
		recvAll(pipe)
		if _, _, exit, err := recvAll(st); err != nil || exit.GetExitCode() != -1 {
			t.Errorf("exit %v err %v, want -1", exit, err)
		}
		noSurvivors(t, m, 0)
	})
	t.Run("NotFound", func(t *testing.T) {
		for _, call := range []func() error{
			func() error {
				_, err := c.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: 424242, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("x")}})
				return err
			},
			func() error {
				_, err := c.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: 424242, Signal: processv1.Signal_SIGNAL_SIGKILL})
				return err
			},
			func() error {
				_, err := c.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: 424242, Cols: 80, Rows: 24})
				return err
			},
		} {
			if err := call(); status.Code(err) != codes.NotFound {
				t.Errorf("%v, want NotFound", err)
			}
		}
	})
	t.Run("ExecuteDeadline", func(t *testing.T) {
		m := newMarker(t)
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := c.Execute(dctx, &processv1.ExecuteRequest{Config: sh(m, "setsid sleep 300 & sleep 300")})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%v, want DeadlineExceeded", err)
		}
		noSurvivors(t, m, 2*time.Second) // the way down: --grace 0.5 s, then SIGKILL
	})
	t.Run("ExecuteFlood", func(t *testing.T) {
		if os.Getenv("CORRAL_HEAVY") != "1" {
			t.Skip("a 1 GB flood: set CORRAL_HEAVY=1 to run it")
		}
		m := newMarker(t)
		fctx, cancel := context.WithTimeout(ctx, 200*time.Second)
		defer cancel()
		resp, err := c.Execute(fctx, &processv1.ExecuteRequest{Config: sh(m, "head -c 1000000000 /dev/zero | tr '\\0' a")})
		if err != nil {
			t.Fatal(err)
		}
		out := string(resp.GetStdout())
		// The spill stops at its ceiling (512 KiB) long before 1 GB, so the
		// marker says how far it goes (docs/wire.md, the spill sentence).
		const want = "\n[truncated: no complete line fits the 96KB limit; kept 98304 bytes of a single 1000000000-byte line. Output up to byte 524288 of 1000000000 saved to "
		i := strings.Index(out, want)
		if len(out) > 96<<10+512 || i != 98304 || strings.Trim(out[:i], "a") != "" || !strings.HasSuffix(out, " — Grep it, or Read it with offset/limit.]") {
			t.Errorf("stdout: %d bytes, marker at %d: %q", len(out), i, out[max(0, len(out)-300):])
		}
		if resp.GetExitCode() != 0 {
			t.Errorf("exit %d, want 0", resp.GetExitCode())
		}
	})
}

// curl runs curl with args and returns its output (-w's status last).
func curl(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	out, err := exec.Command("curl", append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %q: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestSandboxdRESTFiles(t *testing.T) {
	sd := startSandboxd(t)
	f := "http://" + sd.rest + "/v1/files/"
	outside, err := os.MkdirTemp(tmpRoot, "outside-")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600)
	os.Symlink(outside, filepath.Join(sd.root, "out"))
	for _, tc := range []struct {
		args []string
		want string // the output's end: body, newline, status
	}{
		{[]string{"-X", "PUT", "--data-binary", "print(1)\n", f + "src/main.py?mode=0644"}, "\n204"},
		{[]string{f + "src/main.py"}, "print(1)\n\n200"},
		{[]string{"-I", f + "src/main.py"}, "\n200"},
		{[]string{"-X", "PUT", "-F", "file=@-;filename=x", f + "src/up.txt"}, "\n204"}, // multipart, stdin empty
		{[]string{f + "out/secret"}, `"code":"PERMISSION_DENIED"`},
		{[]string{f + "..%2F..%2Fetc%2Fpasswd"}, `"code":"PERMISSION_DENIED"`},
		{[]string{"-X", "PUT", "--data-binary", "x", f + "out/planted"}, "\n403"},
		{[]string{"-X", "DELETE", f + "src"}, "\n409"},
		{[]string{"-X", "DELETE", f + "src?recursive=true"}, "\n204"},
		{[]string{f + "src"}, "\n404"},
		{[]string{"http://" + sd.rest + "/v1/health"}, "\n200"},
	} {
		if out := curl(t, tc.args...); !strings.Contains(out, tc.want) {
			t.Errorf("curl %q: %q, want %q", tc.args, out, tc.want)
		}
	}
	out := curl(t, "-X", "PUT", "--data-binary", "a", f+"d/e.txt")
	out = curl(t, f+"d")
	if !strings.Contains(out, `"name":"e.txt"`) || !strings.Contains(out, `"type":"file"`) || !strings.HasSuffix(out, "\n200") {
		t.Errorf("list: %q", out)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a file was planted outside the root")
	}
}

// TestSandboxdToken: with an operator token, agent-sandbox's client needs
// it in its metadata on every call. corral serve takes one token, so the
// binary has one client; a process is reachable by that token only (no
// token or another one is UNAUTHENTICATED before any process is looked
// up). Several clients, each its own tokens and process ids, are
// sandboxd.Config.Tokens, tested in api/sandboxd.
func TestSandboxdToken(t *testing.T) {
	const token = "sandboxd-deploy-test-token"
	sd := startSandboxdToken(t, token)
	c := sd.client
	bearer := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok)
	}
	m := newMarker(t)
	resp, err := c.Execute(bearer(token), &processv1.ExecuteRequest{Config: sh(m, "echo ok")})
	if err != nil || string(resp.GetStdout()) != "ok\n" {
		t.Fatalf("Execute with the token: %q %v", resp.GetStdout(), err)
	}
	st, id := startProcess(t, bearer(token), c, sh(m, "cat"))
	for _, ctx := range []context.Context{t.Context(), bearer("another-token")} {
		if _, err := c.Execute(ctx, &processv1.ExecuteRequest{Config: sh(m, "echo ran")}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Execute without the token: %v, want Unauthenticated", err)
		}
		if _, err := c.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: id, Signal: processv1.Signal_SIGNAL_SIGKILL}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("SendSignal without the token: %v, want Unauthenticated", err)
		}
		if st, err := c.Start(ctx, &processv1.StartRequest{Config: sh(m, "echo ran")}); err == nil {
			_, err = st.Recv() // a stream's status comes with its first Recv
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("Start without the token: %v, want Unauthenticated", err)
			}
		}
	}
	if _, err := c.WriteStdin(bearer(token), &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("still here\n")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteStdin(bearer(token), &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}); err != nil {
		t.Fatal(err)
	}
	if out, _, exit, err := recvAll(st); err != nil || out != "still here\n" || exit.GetExitCode() != 0 {
		t.Errorf("stdout %q exit %v err %v: the refused calls reached the process", out, exit, err)
	}
	if out := curl(t, "-o", "/dev/null", "http://"+sd.rest+"/v1/files/"); out != "\n401" {
		t.Errorf("REST files without the token: %q, want 401", out)
	}
}
