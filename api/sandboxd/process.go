package sandboxd

import (
	"context"
	"errors"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/corral-sh/corral/api/sandboxd/processpb"
	"github.com/corral-sh/corral/supervisor"
)

// rpc implements processpb.ProcessServiceServer.
type rpc struct {
	processpb.UnimplementedProcessServiceServer
	s *Service
}

// killWait bounds how long a Start whose stream ended, and a SendSignal,
// wait for the tree to be gone.
const killWait = 30 * time.Second

// request turns a ProcessConfig into a supervisor.Request: argv exactly,
// the environment on top of the server's, the cwd beneath the root.
func (s *Service) request(cfg *processpb.ProcessConfig) (supervisor.Request, error) {
	if cfg == nil || len(cfg.GetCommand()) == 0 {
		return supervisor.Request{}, status.Error(codes.InvalidArgument, "command is required")
	}
	if cfg.GetCommand()[0] == "" {
		return supervisor.Request{}, status.Error(codes.InvalidArgument, "command[0] (the program) is empty")
	}
	dir, err := s.workDir(cfg.GetCwd())
	if err != nil {
		return supervisor.Request{}, err
	}
	return supervisor.Request{Argv: cfg.GetCommand(), Dir: dir, Env: cfg.GetEnvVars(), Label: label}, nil
}

// within is what is left of ctx's deadline, within lo and hi; hi without a
// deadline.
func within(ctx context.Context, lo, hi time.Duration) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return hi
	}
	return min(max(lo, time.Until(dl)), hi)
}

// exitCode is what sandboxd reports: the program's exit status, or -1 when
// it did not exit by itself (Go's ProcessState.ExitCode).
func exitCode(res supervisor.Result) int32 {
	if res.ExitCode == nil {
		return -1
	}
	return int32(*res.ExitCode)
}

func (r *rpc) Execute(ctx context.Context, req *processpb.ExecuteRequest) (*processpb.ExecuteResponse, error) {
	s := r.s
	cr, err := s.request(req.GetConfig())
	if err != nil {
		return nil, err
	}
	// The deadline is the timeout; ctx ending at it also aborts the
	// command, so the tree is gone when the client gives up.
	if _, ok := ctx.Deadline(); ok {
		cr.Timeout = within(ctx, supervisor.MinTimeout, s.sup.Bounds().MaxTimeout)
	}
	res, err := s.sup.Run(ctx, cr)
	if s.observe != nil {
		s.observe(res, err)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if err := ctx.Err(); err != nil {
		return nil, toStatus(err)
	}
	return &processpb.ExecuteResponse{ExitCode: exitCode(res), Stdout: []byte(res.Stdout), Stderr: []byte(res.Stderr)}, nil
}

func (r *rpc) Start(req *processpb.StartRequest, stream processpb.ProcessService_StartServer) error {
	s := r.s
	ctx := stream.Context()
	cr, err := s.request(req.GetConfig())
	if err != nil {
		return err
	}
	if pty := req.Pty; pty != nil {
		// A terminal: its one output stream is stdout, WriteStdin types
		// into it; a zero side takes corral's default (docs/terminals.md).
		cr.TTY = &supervisor.TTYSize{Cols: ttySide(pty.GetCols()), Rows: ttySide(pty.GetRows())}
	}
	longest := s.sup.Bounds().MaxJobLifetime
	started, err := s.sup.Jobs().Start(supervisor.JobRequest{Request: cr,
		Lifetime: within(ctx, supervisor.MinTimeout, longest), Interactive: true})
	if err != nil {
		s.observe.Refused(err)
		return toStatus(err)
	}
	js, err := s.sup.Jobs().OpenStream(started.ID)
	if err != nil {
		return toStatus(err)
	}
	s.observe.Ended(js)
	id := s.procs.add(&process{client: client(ctx), job: started.ID, js: js})
	defer s.procs.remove(id)
	// The process lives as long as its stream, as in sandboxd: whatever
	// ends this call before the process ended kills the whole tree.
	defer func() {
		kctx, cancel := context.WithTimeout(context.Background(), killWait)
		defer cancel()
		js.Kill(kctx, true)
	}()
	if err := stream.Send(&processpb.StartResponse{Event: &processpb.StartResponse_Init{
		Init: &processpb.InitEvent{ProcessId: id}}}); err != nil {
		return toStatus(err)
	}
	res, err := follow(ctx, js, func(i int, b mem.Buffer) error {
		field := startStdoutField
		if i == 1 {
			field = startStderrField
		}
		return stream.SendMsg(&rawChunk{field: field, data: b})
	})
	if err != nil {
		return toStatus(err)
	}
	return toStatus(stream.Send(&processpb.StartResponse{Event: &processpb.StartResponse_Exit{
		Exit: &processpb.ExitEvent{ExitCode: exitCode(res)}}}))
}

// find returns the caller's process id, or NOT_FOUND.
func (r *rpc) find(ctx context.Context, id int32) (*process, error) {
	if p := r.s.procs.find(client(ctx), id); p != nil {
		return p, nil
	}
	return nil, status.Errorf(codes.NotFound, "process %d not found", id)
}

func (r *rpc) WriteStdin(ctx context.Context, req *processpb.WriteStdinRequest) (*processpb.WriteStdinResponse, error) {
	p, err := r.find(ctx, req.GetProcessId())
	if err != nil {
		return nil, err
	}
	eof := req.GetEof() != nil
	if eof && p.js.TTY() {
		return nil, status.Errorf(codes.FailedPrecondition, "process %d runs on a pty, which has no end of input to close: "+
			"write \\x04 (Ctrl-D) for an end of file, or send a signal to end it", req.GetProcessId())
	}
	if !eof && len(req.GetInput()) == 0 {
		return &processpb.WriteStdinResponse{}, nil
	}
	if err := r.s.sup.Jobs().Input(p.job, req.GetInput(), eof); err != nil {
		if errors.Is(err, supervisor.ErrJobStdin) {
			return nil, status.Errorf(codes.FailedPrecondition, "process %d: %v", req.GetProcessId(), toStatusMessage(err))
		}
		return nil, toStatus(err)
	}
	return &processpb.WriteStdinResponse{}, nil
}

// toStatusMessage is the client message of err, as toStatus words it.
func toStatusMessage(err error) string { return status.Convert(toStatus(err)).Message() }

func (r *rpc) SendSignal(ctx context.Context, req *processpb.SendSignalRequest) (*processpb.SendSignalResponse, error) {
	sig := req.GetSignal()
	switch sig {
	case processpb.Signal_SIGNAL_SIGINT, processpb.Signal_SIGNAL_SIGTERM, processpb.Signal_SIGNAL_SIGKILL:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unsupported or unspecified signal: %v (send SIGNAL_SIGINT, SIGNAL_SIGTERM or SIGNAL_SIGKILL)", sig)
	}
	p, err := r.find(ctx, req.GetProcessId())
	if err != nil {
		return nil, err
	}
	if sig == processpb.Signal_SIGNAL_SIGINT {
		if _, err := p.js.Signal(syscall.SIGINT); err != nil {
			return nil, toStatus(err)
		}
		return &processpb.SendSignalResponse{}, nil
	}
	kctx, cancel := context.WithTimeout(ctx, killWait)
	defer cancel()
	if err := p.js.Kill(kctx, sig == processpb.Signal_SIGNAL_SIGKILL); err != nil {
		return nil, toStatus(err)
	}
	return &processpb.SendSignalResponse{}, nil
}

// ResizeTTY sets the size of a pty process's terminal; the kernel sends
// SIGWINCH to its foreground process group. A process started without a
// pty, or a size out of 1 to supervisor.MaxTTYCells a side, is
// INVALID_ARGUMENT; one that already exited (its stream not yet ended) is
// FAILED_PRECONDITION.
func (r *rpc) ResizeTTY(ctx context.Context, req *processpb.ResizeTTYRequest) (*processpb.ResizeTTYResponse, error) {
	p, err := r.find(ctx, req.GetProcessId())
	if err != nil {
		return nil, err
	}
	sz := supervisor.TTYSize{Cols: ttySide(req.GetCols()), Rows: ttySide(req.GetRows())}
	if err := r.s.sup.Jobs().Resize(p.job, sz); err != nil {
		switch {
		case errors.Is(err, supervisor.ErrNoTerminal):
			return nil, status.Errorf(codes.InvalidArgument, "process %d was started without a pty: it has no terminal to resize", req.GetProcessId())
		case errors.Is(err, supervisor.ErrJobStdin):
			return nil, status.Errorf(codes.FailedPrecondition, "process %d has exited", req.GetProcessId())
		}
		return nil, toStatus(err)
	}
	return &processpb.ResizeTTYResponse{}, nil
}

// ttySide is a terminal side of the wire as corral's: clamped before the
// conversion, so a huge uint32 stays out of range and never wraps into it.
func ttySide(n uint32) int { return int(min(n, supervisor.MaxTTYCells+1)) }
