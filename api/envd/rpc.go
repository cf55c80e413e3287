package envd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/corral-sh/corral/api/envd/processpb"
	"github.com/corral-sh/corral/supervisor"
)

// rpc implements processpbconnect.ProcessHandler.
type rpc struct {
	s *Service
}

// testHookStarted, when set by a test, runs between the job's start and
// the start event.
var testHookStarted func(ctx context.Context)

// killWait bounds how long a Start whose client went before the start
// event, and a SendSignal, wait for the tree to be gone.
const killWait = 30 * time.Second

func (r *rpc) Start(ctx context.Context, req *connect.Request[processpb.StartRequest], stream *connect.ServerStream[processpb.StartResponse]) error {
	s := r.s
	m := req.Msg
	cfg := m.GetProcess()
	switch {
	case cfg == nil:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process is required"))
	case cfg.GetCmd() == "":
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is empty"))
	}
	runAs, err := s.requestUser(req.Header())
	if err != nil {
		return err
	}
	jr := supervisor.JobRequest{
		Request: supervisor.Request{
			Argv:    argv(cfg),
			Dir:     s.dir(cfg.Cwd, runAs),
			User:    runAs,
			Env:     cfg.GetEnvs(),
			Session: session(m.GetTag()),
			Label:   label,
		},
		Lifetime:    s.lifetime(ctx),
		Interactive: m.Stdin == nil || *m.Stdin,
	}
	if m.Pty != nil {
		// A terminal, as envd starts one: its input is the pty input (and
		// stdin), its one output stream the pty data.
		jr.TTY = &supervisor.TTYSize{Cols: int(m.Pty.GetSize().GetCols()), Rows: int(m.Pty.GetSize().GetRows())}
	}
	started, err := s.sup.Jobs().Start(jr)
	if err != nil {
		s.observe.Refused(err)
		return toConnect(err)
	}
	js, err := s.sup.Jobs().OpenStream(started.ID)
	if err != nil {
		return toConnect(err)
	}
	s.observe.Ended(js)
	p := &process{id: started.ID, pid: uint32(started.Pid), tag: m.GetTag(), hasTag: m.Tag != nil,
		config: cfg, started: time.Now(), js: js}
	s.procs.add(s.sup, p)

	// Until the start event is out, the client has no pid to reach the
	// process by: a stream gone before it kills the process.
	if testHookStarted != nil {
		testHookStarted(ctx)
	}
	err = ctx.Err()
	if err == nil {
		err = stream.Send(&processpb.StartResponse{Event: startEvent(p.pid)})
	}
	if err != nil {
		kctx, cancel := context.WithTimeout(context.Background(), killWait)
		defer cancel()
		js.Kill(kctx, true)
		return toConnect(err)
	}
	return s.follow(ctx, js, keepalive(req.Header()), func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.StartResponse{Event: ev})
	})
}

func (r *rpc) Connect(ctx context.Context, req *connect.Request[processpb.ConnectRequest], stream *connect.ServerStream[processpb.ConnectResponse]) error {
	p, err := r.s.procs.find(req.Msg.GetProcess(), true)
	if err != nil {
		return err
	}
	send := func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.ConnectResponse{Event: ev})
	}
	if err := send(startEvent(p.pid)); err != nil {
		return toConnect(err)
	}
	return r.s.follow(ctx, p.js, keepalive(req.Header()), send)
}

func (r *rpc) List(ctx context.Context, req *connect.Request[processpb.ListRequest]) (*connect.Response[processpb.ListResponse], error) {
	var out []*processpb.ProcessInfo
	for _, p := range r.s.procs.list() {
		info := &processpb.ProcessInfo{Config: p.config, Pid: p.pid}
		if p.hasTag {
			info.Tag = &p.tag
		}
		if j, err := r.s.sup.Jobs().Get(p.id); err == nil && j.Waiting != nil {
			// corral's addition (docs/terminals.md): envd's clients skip it.
			w := j.Waiting
			info.Waiting = &processpb.Waiting{Since: w.Since.UTC().Format(time.RFC3339Nano), Pid: uint32(w.Pid),
				Argv: w.Argv, Kind: w.Kind, Prompt: w.Prompt}
		}
		out = append(out, info)
	}
	return connect.NewResponse(&processpb.ListResponse{Processes: out}), nil
}

// Update resizes a process's terminal (the only update envd has).
func (r *rpc) Update(ctx context.Context, req *connect.Request[processpb.UpdateRequest]) (*connect.Response[processpb.UpdateResponse], error) {
	p, err := r.s.procs.find(req.Msg.GetProcess(), false)
	if err != nil {
		return nil, err
	}
	if pty := req.Msg.GetPty(); pty != nil {
		sz := supervisor.TTYSize{Cols: int(pty.GetSize().GetCols()), Rows: int(pty.GetSize().GetRows())}
		if err := r.s.sup.Jobs().Resize(p.id, sz); err != nil {
			return nil, toConnect(err)
		}
	}
	return connect.NewResponse(&processpb.UpdateResponse{}), nil
}

func (r *rpc) SendInput(ctx context.Context, req *connect.Request[processpb.SendInputRequest]) (*connect.Response[processpb.SendInputResponse], error) {
	p, err := r.s.procs.find(req.Msg.GetProcess(), false)
	if err != nil {
		return nil, err
	}
	if err := r.s.input(p, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.SendInputResponse{}), nil
}

// input writes one ProcessInput to p's stdin.
func (s *Service) input(p *process, in *processpb.ProcessInput) error {
	switch v := in.GetInput().(type) {
	case *processpb.ProcessInput_Stdin:
		return toConnect(s.sup.Jobs().Input(p.id, v.Stdin, false))
	case *processpb.ProcessInput_Pty:
		if !p.js.TTY() {
			return connect.NewError(connect.CodeInvalidArgument, errors.New("pty input: the process was started without a pty; send stdin"))
		}
		return toConnect(s.sup.Jobs().Input(p.id, v.Pty, false))
	}
	return connect.NewError(connect.CodeInvalidArgument, errors.New("input is required (stdin)"))
}

func (r *rpc) StreamInput(ctx context.Context, stream *connect.ClientStream[processpb.StreamInputRequest]) (*connect.Response[processpb.StreamInputResponse], error) {
	var p *process
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *processpb.StreamInputRequest_Start:
			if p != nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input: a second start event"))
			}
			var err error
			if p, err = r.s.procs.find(ev.Start.GetProcess(), false); err != nil {
				return nil, err
			}
		case *processpb.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input: data before the start event"))
			}
			if err := r.s.input(p, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		case *processpb.StreamInputRequest_Keepalive:
		default:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input: an empty event"))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.StreamInputResponse{}), nil
}

func (r *rpc) SendSignal(ctx context.Context, req *connect.Request[processpb.SendSignalRequest]) (*connect.Response[processpb.SendSignalResponse], error) {
	var hard bool
	switch sig := req.Msg.GetSignal(); sig {
	case processpb.Signal_SIGNAL_SIGKILL:
		hard = true
	case processpb.Signal_SIGNAL_SIGTERM:
	default:
		return nil, connect.NewError(connect.CodeUnimplemented,
			fmt.Errorf("signal %v is not supported: send SIGNAL_SIGTERM or SIGNAL_SIGKILL", sig))
	}
	p, err := r.s.procs.find(req.Msg.GetProcess(), false)
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithTimeout(ctx, killWait)
	defer cancel()
	if err := p.js.Kill(kctx, hard); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&processpb.SendSignalResponse{}), nil
}

func (r *rpc) CloseStdin(ctx context.Context, req *connect.Request[processpb.CloseStdinRequest]) (*connect.Response[processpb.CloseStdinResponse], error) {
	p, err := r.s.procs.find(req.Msg.GetProcess(), false)
	if err != nil {
		return nil, err
	}
	if err := r.s.sup.Jobs().Input(p.id, nil, true); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&processpb.CloseStdinResponse{}), nil
}
