package sandboxd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/corral-sh/corral/api/sandboxd/processpb"
	"github.com/corral-sh/corral/internal/proctest"
)

// startPTY runs cfg with Start on a pty of cols×rows and returns the
// stream and the process id.
func startPTY(t *testing.T, ctx context.Context, c processpb.ProcessServiceClient, cfg *processpb.ProcessConfig, cols, rows uint32) (processpb.ProcessService_StartClient, int32) {
	t.Helper()
	st, err := c.Start(ctx, &processpb.StartRequest{Config: cfg, Pty: &processpb.PTY{Cols: cols, Rows: rows}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || ev.GetInit() == nil {
		t.Fatalf("first event %v, %v; want init", ev, err)
	}
	return st, ev.GetInit().GetProcessId()
}

// until reads st's stdout until it holds want, and returns what it read;
// a stderr message, the stream's end or its error first fails the test.
func until(t *testing.T, st processpb.ProcessService_StartClient, want string) string {
	t.Helper()
	var got strings.Builder
	for !strings.Contains(got.String(), want) {
		ev, err := st.Recv()
		if err != nil {
			t.Fatalf("%v after %q; want %q", err, got.String(), want)
		}
		switch v := ev.GetEvent().(type) {
		case *processpb.StartResponse_Stdout:
			got.Write(v.Stdout)
		case *processpb.StartResponse_Stderr:
			t.Fatalf("a stderr message %q on a pty: its one stream is stdout", v.Stderr)
		case *processpb.StartResponse_Exit:
			t.Fatalf("exit %d after %q; want %q", v.Exit.GetExitCode(), got.String(), want)
		}
	}
	return got.String()
}

// TestStartPTY: a pty process runs on a terminal of the size asked, and its
// output, stderr's included, is the one stdout stream.
func TestStartPTY(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st, _ := startPTY(t, t.Context(), e.client, bash(marker,
		"[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo on-a-tty; stty size; echo to-stderr >&2; echo TERM=$TERM; exit 4"), 91, 17)
	out, errOut, exit, err := drain(st)
	if err != nil || exit.GetExitCode() != 4 {
		t.Fatalf("exit %v err %v, want 4", exit, err)
	}
	for _, want := range []string{"on-a-tty\r\n", "17 91\r\n", "to-stderr\r\n", "TERM=xterm-256color"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout %q lacks %q", out, want)
		}
	}
	if errOut != "" {
		t.Errorf("stderr %q, want nothing: a terminal has one stream", errOut)
	}
	// A zero size takes corral's default terminal (120×40).
	st, _ = startPTY(t, t.Context(), e.client, bash(marker, "stty size"), 0, 0)
	if out, _, _, err := drain(st); err != nil || !strings.Contains(out, "40 120") {
		t.Errorf("pty 0x0: %q %v, want 40 120", out, err)
	}
}

// TestPTYInput: WriteStdin types into the terminal (the line discipline
// echoes it, Ctrl-C interrupts); EOF is refused with what to send instead.
func TestPTYInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, marker := proctest.Marker(t)
	st, id := startPTY(t, t.Context(), e.client, bash(marker,
		"trap 'echo got-int' INT; echo ready; read line; echo \"read:$line\"; while :; do sleep 0.1; done"), 80, 24)
	until(t, st, "ready")
	write := func(in string) {
		t.Helper()
		if _, err := e.client.WriteStdin(t.Context(), &processpb.WriteStdinRequest{ProcessId: id,
			Payload: &processpb.WriteStdinRequest_Input{Input: []byte(in)}}); err != nil {
			t.Fatal(err)
		}
	}
	write("hello\r")
	if out := until(t, st, "read:hello"); !strings.Contains(out, "hello\r\n") {
		t.Errorf("output %q lacks the echo of the typed line", out)
	}
	write("\x03") // Ctrl-C: SIGINT through the line discipline
	until(t, st, "got-int")
	_, err := e.client.WriteStdin(t.Context(), &processpb.WriteStdinRequest{ProcessId: id,
		Payload: &processpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
	if msg := status.Convert(err).Message(); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(msg, "Ctrl-D") || !strings.HasPrefix(msg, fmt.Sprintf("process %d runs on a pty", id)) {
		t.Errorf("EOF on a pty: %v, want FailedPrecondition naming the process and Ctrl-D", err)
	}
	if _, err := e.client.SendSignal(t.Context(), &processpb.SendSignalRequest{ProcessId: id, Signal: processpb.Signal_SIGNAL_SIGKILL}); err != nil {
		t.Fatal(err)
	}
	proctest.NoSurvivors(t, marker, 2*time.Second)
}

// TestResizeTTY: a resize reaches the process as SIGWINCH with the new
// size; a pipe process, a bad size, another client's id and an exited
// process are refused, each with its code.
func TestResizeTTY(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "token-a", "token-b")
	a, b := withToken(t.Context(), "token-a"), withToken(t.Context(), "token-b")
	_, marker := proctest.Marker(t)
	st, id := startPTY(t, a, e.client, bash(marker,
		"trap 'echo \"winch:$(stty size)\"' WINCH; echo ready; while :; do sleep 0.1; done"), 80, 24)
	until(t, st, "ready")
	if _, err := e.client.ResizeTTY(a, &processpb.ResizeTTYRequest{ProcessId: id, Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	until(t, st, "winch:43 132")

	pipe, pipeID := start(t, a, e.client, bash(marker, "cat"))
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *processpb.ResizeTTYRequest
		want codes.Code
	}{
		{"another client's id", b, &processpb.ResizeTTYRequest{ProcessId: id, Cols: 100, Rows: 30}, codes.NotFound},
		{"a pipe process", a, &processpb.ResizeTTYRequest{ProcessId: pipeID, Cols: 100, Rows: 30}, codes.InvalidArgument},
		{"zero cols", a, &processpb.ResizeTTYRequest{ProcessId: id, Rows: 30}, codes.InvalidArgument},
		{"too many rows", a, &processpb.ResizeTTYRequest{ProcessId: id, Cols: 100, Rows: 1001}, codes.InvalidArgument},
		{"2^32-1 cols", a, &processpb.ResizeTTYRequest{ProcessId: id, Cols: 1<<32 - 1, Rows: 30}, codes.InvalidArgument},
	} {
		if _, err := e.client.ResizeTTY(tc.ctx, tc.req); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// None of the refused resizes reached the terminal.
	if _, err := e.client.ResizeTTY(a, &processpb.ResizeTTYRequest{ProcessId: id, Cols: 70, Rows: 20}); err != nil {
		t.Fatal(err)
	}
	if out := until(t, st, "winch:20 70"); strings.Contains(out, "winch:30") || strings.Contains(out, "winch:1001") {
		t.Errorf("a refused resize reached the terminal: %q", out)
	}
	for _, id := range []int32{id, pipeID} {
		if _, err := e.client.SendSignal(a, &processpb.SendSignalRequest{ProcessId: id, Signal: processpb.Signal_SIGNAL_SIGKILL}); err != nil {
			t.Fatal(err)
		}
	}
	drain(pipe)
	drain(st)
	proctest.NoSurvivors(t, marker, 2*time.Second)
}
