package supervisor

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/killtree"
)

// Run runs r to completion and returns its Result. A Request that fails
// validation returns an error wrapping ErrInvalidRequest before anything
// starts; a failure to start the shell returns an error too. Once the
// command ran, Run returns a Result and a nil error whatever the command's
// exit code. Cancelling ctx aborts the command: its tree is killed and the
// Result has Aborted set. Run is safe for concurrent use; while a command
// runs, Run holds an OS thread in a blocking system call (as os/exec's Wait
// does), on Linux until the command ends or proves busy.
func (s *Supervisor) Run(ctx context.Context, r Request) (Result, error) {
	v, err := s.validate(r)
	if err != nil {
		return Result{}, err
	}
	p, err := s.start(v)
	if err != nil {
		return Result{}, err
	}
	return p.finish(p.supervise(ctx)), nil
}

// proc is one running command and everything its lifecycle owns.
type proc struct {
	s        *Supervisor
	v        validated
	id       string
	log      zerolog.Logger
	begin    time.Time
	cmd      *exec.Cmd
	tree     *killtree.Tree
	out, err *retained
	outs     outputs       // the read ends of stdout and stderr (per OS)
	stdinW   *os.File      // nil when stdin is /dev/null
	stdinEnd chan struct{} // closed when the stdin writer returned
	drained  chan error    // one value per stream drained in the background at its end; buffered 2
	pending  int           // how many values drained will carry
	live     *live
	kill     KillInfo
	sent     string // the signal the way down sent last
}

func (s *Supervisor) newID() string {
	return "c-" + strconv.FormatInt(int64(os.Getpid()), 36) + "-" + strconv.FormatUint(s.seq.Add(1), 36)
}

// start creates the pipes and starts the shell inside a fresh containment;
// wait drains it. On error nothing is left open or running.
func (s *Supervisor) start(v validated) (_ *proc, retErr error) {
	p := &proc{s: s, v: v, id: s.newID(), begin: time.Now(), drained: make(chan error, 2),
		stdinEnd: make(chan struct{})}
	p.log = s.log.With().Str("id", p.id).Logger()
	wOut, wErr, err := p.outs.open()
	if err != nil {
		return nil, fmt.Errorf("supervisor: output pipes: %w", err)
	}
	closers := []*os.File{wOut, wErr}
	defer func() {
		if retErr != nil {
			p.outs.close()
			for _, f := range closers {
				f.Close()
			}
		}
	}()
	s.devMu.RLock()
	defer s.devMu.RUnlock()
	stdinR := s.devNull
	if stdinR == nil {
		return nil, fmt.Errorf("supervisor: start %s: %w", s.shell, killtree.ErrClosed)
	}
	if v.Stdin != nil || v.interactive {
		if stdinR, p.stdinW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("supervisor: stdin pipe: %w", err)
		}
		closers = append(closers, stdinR, p.stdinW)
	}

	// Everything that does not need the child is made before it runs: the
	// work done between the fork and the first poll competes with the
	// child's start for the CPU it often shares with us.
	p.out = newRetained(v.stdout, s.cfg.Capture, &s.drained, v.notify)
	p.err = newRetained(v.stderr, s.cfg.Capture, &s.drained, v.notify)
	p.live = newLive(v.OnEvent, s.liveCap)

	cmd := exec.Command(s.shell, "-c", v.Command)
	cmd.Dir = v.Dir
	cmd.Env = s.environ(v, p.id)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, wOut, wErr
	tree, err := s.trees.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("supervisor: start %s: %w", s.shell, err)
	}
	// The child has its copies; ours would keep the pipes from reaching EOF.
	wOut.Close()
	wErr.Close()
	if stdinR != s.devNull {
		stdinR.Close()
	}
	p.cmd, p.tree = cmd, tree
	p.outs.watch(p)
	p.log.Debug().Int("pid", tree.Pid()).Str("tier", string(tree.Tier())).Msg("started")

	s.started.Add(1)
	s.running.Add(1)
	if p.live != nil {
		p.live.started(tree.Pid())
		go p.live.run()
	}
	if p.stdinW != nil && !v.interactive {
		go func() {
			defer close(p.stdinEnd)
			// EPIPE (nobody reads) and ErrClosed (the way down closed it)
			// both just end the feed.
			p.stdinW.Write(v.Stdin)
			p.stdinW.Close()
		}()
	} else {
		close(p.stdinEnd)
	}
	return p, nil
}

// supervise drains the command until the shell exits, the timeout passes or
// the context is cancelled (wait, per OS), and then takes the tree down. It
// returns why the command ended.
func (p *proc) supervise(ctx context.Context) ending {
	end := p.wait(ctx)
	p.log.Debug().Int("end", int(end)).Msg("stopping")

	if end == endExited {
		// Lifecycle rule 3: what the shell left running gets a short
		// settle, then it is lingering and goes down like a timeout.
		sctx, cancel := context.WithTimeout(context.Background(), p.s.settle)
		err := p.tree.WaitEmpty(sctx)
		cancel()
		if err != nil {
			n, _ := p.tree.Stop()
			p.kill.Lingering = n
		}
	}
	if end != endExited || p.kill.Lingering > 0 {
		// Growth stops before the count (Stop): a walk of a fork bomb
		// that still forks takes seconds and makes the Result late.
		p.kill.Processes, _ = p.tree.Stop()
		p.log.Debug().Int("members", p.kill.Processes).Int("lingering", p.kill.Lingering).Msg("way down")
		p.graceful()
	}
	report, err := p.tree.Kill()
	if err != nil {
		p.log.Warn().Err(err).Msg("kill")
	}
	p.log.Debug().Int("killed", report.Processes).Int("escapees", report.Escapees).
		Dur("took", report.Duration).Msg("tree confirmed empty")
	if report.Processes > 0 {
		p.sent = "SIGKILL"
	}
	p.kill.Processes = max(p.kill.Processes, report.Processes)
	p.kill.Tier = string(report.Tier)
	p.drainAll()
	return end
}

// selectEnd waits for the tree's exit watcher, the deadline or the abort,
// while the drains run elsewhere.
func (p *proc) selectEnd(ctx context.Context, deadline time.Time) ending {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-p.tree.Exited():
		if p.s.closing.Load() {
			return endAborted // Close killed it (or it ended as Close began)
		}
		return endExited
	case <-timer.C:
		return endTimedOut
	case <-ctx.Done():
		return endAborted
	}
}

// graceful is the first phase of the way down: SIGTERM to every member and
// a grace period that ends as soon as the tree is empty.
func (p *proc) graceful() {
	if p.s.grace <= 0 {
		return
	}
	// The grace counts from here: Terminate's scan of a large tree is part
	// of it, not added to it.
	gctx, cancel := context.WithTimeout(context.Background(), p.s.grace)
	defer cancel()
	if n, err := p.tree.Terminate(); err != nil || n == 0 {
		return
	}
	p.sent = "SIGTERM"
	err := p.tree.WaitEmpty(gctx)
	p.log.Debug().Bool("emptied", err == nil).Msg("grace over")
}

// drainAll waits for both pipes to reach EOF. EOF proves that no writer is
// left; when it does not come, whoever still holds a write end escaped the
// containment and the pipe-holder scan kills it.
func (p *proc) drainAll() {
	pending := p.pending
	wait := func(d time.Duration) {
		if pending == 0 {
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		for pending > 0 {
			select {
			case err := <-p.drained:
				if err != nil {
					p.log.Warn().Err(err).Msg("drain")
				}
				pending--
			case <-t.C:
				return
			}
		}
	}
	wait(drainWait)
	if pending == 0 {
		p.log.Debug().Msg("pipes at EOF")
	}
	for round := 0; pending > 0 && round < 5; round++ {
		n, err := p.tree.KillPipeHolders()
		if err != nil {
			p.log.Warn().Err(err).Msg("pipe-holder scan")
		}
		p.kill.Escapees += n
		p.kill.Processes += n
		p.log.Warn().Int("escapees", n).Msg("pipes still open after the kill")
		wait(drainWait)
	}
	if pending > 0 {
		// Nothing found holds the pipes, yet they stay open: stop reading
		// rather than hang. Logged as a containment failure.
		p.log.Error().Msg("pipes never reached EOF; closing them")
		p.stopDrains()
		wait(time.Minute)
	}
}

// finish reaps the shell, releases everything and builds the Result. The
// result event is the last event the callback receives.
func (p *proc) finish(end ending) Result {
	werr := p.cmd.Wait()
	defer p.s.running.Add(-1)
	if err := p.tree.Close(); err != nil {
		p.log.Warn().Err(err).Msg("close containment")
	}
	if p.stdinW != nil {
		p.stdinW.Close()
	}
	<-p.stdinEnd
	p.outs.close()
	if p.live != nil {
		<-p.live.done
	}

	res := Result{
		TimedOut:   end == endTimedOut,
		Aborted:    end == endAborted,
		DurationMs: time.Since(p.begin).Milliseconds(),
		Kill:       p.kill,
	}
	code, sig := exitStatus(p.cmd.ProcessState)
	switch {
	case werr != nil && p.cmd.ProcessState == nil:
		p.log.Warn().Err(werr).Msg("wait")
		res.Signal = "SIGKILL"
	case end != endExited:
		// The shell died of a signal, or exited by itself in answer to
		// the one the way down sent.
		res.Signal = cmp.Or(sig, p.sent, "SIGKILL")
	case sig != "":
		res.Signal = sig
	default:
		res.ExitCode = &code
	}
	res.Stdout, res.StdoutInfo = p.shape(p.out, "stdout")
	res.Stderr, res.StderrInfo = p.shape(p.err, "stderr")
	res.Stderr = withNote(res.Stderr, p.s.note(end, p.v, p.kill))
	res.Truncated = res.StdoutInfo.Truncated || res.StderrInfo.Truncated

	if p.v.OnEvent != nil {
		r := res
		p.v.OnEvent(Event{Event: EventResult, Result: &r})
	}
	p.logResult(res)
	return res
}

// shape builds the model view of one stream, spilling the retained bytes
// first when the view will be cut. A failed spill costs only the spill
// sentence.
func (p *proc) shape(r *retained, stream string) (string, budget.Info) {
	data, counts := r.snapshot()
	opts := budget.Options{Policy: r.policy, Limits: p.s.cfg.Budget, Raw: p.s.cfg.RawOutput}
	view, info := budget.Shape(data, counts, opts)
	if !info.Truncated || p.s.spills == nil || len(data) == 0 {
		return view, info
	}
	label := p.v.Label
	if len(label) > 120 {
		label = label[:120]
	}
	path, err := p.s.spills.Write(p.v.Session, label+"."+stream, data)
	if err != nil {
		p.log.Warn().Err(err).Str("stream", stream).Msg("spill")
		return view, info
	}
	opts.SpillPath = path
	return budget.Shape(data, counts, opts)
}

func (p *proc) logResult(res Result) {
	ev := p.log.Info().
		Int64("durationMs", res.DurationMs).
		Bool("timedOut", res.TimedOut).
		Bool("aborted", res.Aborted).
		Int64("stdoutBytes", res.StdoutInfo.TotalBytes).
		Int64("stderrBytes", res.StderrInfo.TotalBytes).
		Str("tier", res.Kill.Tier).
		Int("killed", res.Kill.Processes).
		Int("lingering", res.Kill.Lingering).
		Int("escapees", res.Kill.Escapees)
	if res.ExitCode != nil {
		ev = ev.Int("exit", *res.ExitCode)
	} else {
		ev = ev.Str("signal", res.Signal)
	}
	ev.Msg("command")
}
