package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/corral-sh/corral/killtree"
)

// start creates the pipes and starts the shell inside a fresh containment;
// wait drains it. On error nothing is left open or running.
func (s *Supervisor) start(v validated) (*proc, error) {
	p := &proc{s: s, v: v, id: s.newID(), begin: time.Now(), drained: make(chan error, 2),
		stdinEnd: make(chan struct{})}
	p.log = s.log.With().Str("id", p.id).Str("session", v.Session).Str("label", v.Label).Logger()
	// The read lock spans the fork: Close takes it for writing before it
	// closes the /dev/null every command's stdin is, so that the
	// descriptor's number cannot be reused under a fork in progress.
	s.devMu.RLock()
	defer s.devMu.RUnlock()
	pr, err := s.prepare(p)
	if err != nil {
		return nil, err
	}
	if err := s.launch(p, pr); err != nil {
		return nil, err
	}
	return p, nil
}

// prepared is what prepare made for launch.
type prepared struct {
	cmd        *exec.Cmd
	wOut, wErr *os.File   // the child's ends of the output pipes
	stdinR     *os.File   // the child's stdin: s.devNull or the read end of p.stdinW's pipe
	gate       *startGate // nil: the journal entry, if any, is written before the start
}

// prepare makes everything the start needs before the child exists: the
// output and stdin pipes, the captures, the journal gate, the session
// state, and the command with its directory, environment, user and
// program path. Everything that does not need the child is made before it
// runs: the work done between the fork and the first poll competes with
// the child's start for the CPU it often shares with us. On error it
// releases what it made. The caller holds s.devMu for reading.
func (s *Supervisor) prepare(p *proc) (_ *prepared, retErr error) {
	v := p.v
	pr := &prepared{}
	var err error
	if pr.wOut, pr.wErr, err = p.openOutputs(); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.unprepare(p, pr)
		}
	}()
	if pr.stdinR = s.devNull; pr.stdinR == nil {
		return nil, errClosed
	}
	if p.term != nil {
		p.stdinW = p.term.master // a terminal's input is typed into its master
	} else if v.Stdin != nil || v.interactive {
		if pr.stdinR, p.stdinW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("supervisor: stdin pipe: %w", err)
		}
	}
	p.out = newRetained(v.stdout, s.cfg.Capture, &s.drained, v.notify, v.grew)
	p.err = newRetained(v.stderr, s.cfg.Capture, &s.drained, v.notify, v.grew)
	p.live = newLive(v.OnEvent, s.liveCap)
	if p.term != nil {
		p.live.eof(stderrStream) // a terminal has one output stream
	}

	pr.cmd = exec.Command(s.shell, "-c", v.Command)
	if v.Argv != nil {
		pr.cmd = &exec.Cmd{Args: v.Argv} // Path once the environment is known
	}
	pr.cmd.Dir = v.Dir
	if s.gateable(v) {
		pr.gate = newGate()
	}
	var base []string
	if s.tracked(v) {
		if p.state, err = s.beginState(v, pr.gate != nil); err != nil {
			return nil, err
		}
		pr.cmd.Dir, base = p.state.dir, p.state.env
	}
	if err := s.command(p, pr.cmd, base); err != nil {
		return nil, err
	}
	if pr.gate != nil && !pr.gate.attach(s, pr.cmd, p.state) {
		pr.gate = nil // attach closed it
	}
	pr.cmd.Stdin, pr.cmd.Stdout, pr.cmd.Stderr = pr.stdinR, pr.wOut, pr.wErr
	if v.JoinStderr {
		// One pipe for both: the stderr pipe has no writer but ours, which
		// launch closes, so its drain ends at once.
		pr.cmd.Stderr = pr.wOut
	}
	if p.term != nil {
		p.term.attach(pr.cmd)
	}
	return pr, nil
}

// command gives cmd its environment (base: the session's, nil for the
// supervisor's own), the user it runs as, its program's path when it runs
// by Argv, and the session state's descriptors.
func (s *Supervisor) command(p *proc, cmd *exec.Cmd, base []string) error {
	v := p.v
	cmd.Env = s.environ(v, p.id, base)
	if v.user != nil {
		v.user.apply(cmd)
		if cmd.Dir == "" {
			cmd.Dir = v.user.dir
		}
	}
	if v.Argv != nil {
		var err error
		if cmd.Path, err = lookPath(v.Argv[0], cmd.Env, cmd.Dir); err != nil {
			return err
		}
	}
	if p.state != nil {
		p.state.prepare(cmd)
	}
	return nil
}

// unprepare releases what prepare made, for a start that failed: the
// session state, a gate never begun, and every pipe.
func (s *Supervisor) unprepare(p *proc, pr *prepared) {
	if p.state != nil {
		s.abandonState(p.state)
	}
	if pr.gate != nil && !pr.gate.begun {
		pr.gate.abandon() // the start failed before the shell's
	}
	p.outs.close()
	pr.wOut.Close()
	pr.wErr.Close()
	if pr.stdinR != nil && pr.stdinR != s.devNull {
		pr.stdinR.Close()
	}
	if p.stdinW != nil {
		p.stdinW.Close()
	}
	if p.term != nil {
		p.term.slave.Close() // the master is p.stdinW
	}
}

// launch starts what prepare made inside a fresh containment, with its
// journal entry written beside the start (behind the gate) or before it,
// closes the child's ends of the pipes, and starts the pipe watchers, the
// live events and the stdin feeder. On error it releases what prepare
// made, and the journal entry is abandoned.
func (s *Supervisor) launch(p *proc, pr *prepared) (retErr error) {
	defer func() {
		if retErr != nil {
			s.unprepare(p, pr)
		}
	}()
	if pr.gate != nil {
		pr.gate.begin(p)
	} else {
		p.journalStart()
	}
	v := p.v
	tree, err := s.trees.StartLimited(pr.cmd, killtree.Limits{
		MemoryBytes: v.Limits.MemoryBytes, CPUs: v.Limits.CPUs, Pids: v.Limits.Pids})
	if pr.gate != nil {
		pr.gate.release(err == nil)
	}
	if p.jst != nil {
		// The log names a journaled command by its entry's ID (r-…), so a
		// log line joins its journal entry; runId is its CORRAL_RUN_ID.
		p.log = s.log.With().Str("id", p.jst.ID).Str("runId", p.id).Str("session", v.Session).Str("label", v.Label).Logger()
	}
	if err != nil {
		err = s.startError(pr.cmd, v, err)
		p.journalAbandon(err)
		return err
	}
	p.deletions = s.busy(v.Session, 1)
	if p.state != nil && p.state.ch != nil {
		p.state.ch.started()
	}
	// The child has its copies; ours would keep the pipes from reaching EOF
	// (a terminal's master from its end).
	if p.term != nil {
		p.term.slave.Close()
	} else {
		pr.wOut.Close()
		pr.wErr.Close()
	}
	if pr.stdinR != s.devNull {
		pr.stdinR.Close()
	}
	p.cmd, p.tree = pr.cmd, tree
	p.outs.watch(p)
	p.log.Debug().Int("pid", tree.Pid()).Str("tier", string(tree.Tier())).Msg("started")

	s.started.Add(1)
	s.running.Add(1)
	if p.live != nil {
		p.live.started(tree.Pid())
		go p.live.run()
	}
	p.feedStdin()
	return nil
}

// startError is the error of a start the containment refused: a command and
// environment too large to exec (ErrInvalidRequest), ErrClosed, or the
// start's own failure.
func (s *Supervisor) startError(cmd *exec.Cmd, v validated, err error) error {
	switch {
	case errors.Is(err, syscall.E2BIG):
		return argSizeError(cmd, err)
	case errors.Is(err, killtree.ErrClosed):
		return errClosed
	}
	what := s.shell
	if v.Argv != nil {
		what = v.Argv[0]
	}
	return fmt.Errorf("supervisor: start %s: %w", what, err)
}

// feedStdin writes Request.Stdin into the command's stdin pipe and closes
// it, in the background; p.stdinEnd is closed when that is done, at once
// when there is nothing to feed (stdin is /dev/null, or an interactive
// job's, written by Jobs.Input).
func (p *proc) feedStdin() {
	if p.stdinW == nil || p.v.interactive {
		close(p.stdinEnd)
		return
	}
	go func() {
		defer close(p.stdinEnd)
		// EPIPE (nobody reads) and ErrClosed (the way down closed it)
		// both just end the feed.
		p.stdinW.Write(p.v.Stdin)
		p.stdinW.Close()
	}()
}
