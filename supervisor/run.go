package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/killtree"
)

// ErrClientGone, as the cause of cancelling Run's context
// (context.WithCancelCause), aborts the command without the graceful phase:
// its whole tree gets SIGKILL at once. Front ends give it when the client
// that would read the Result went away, since nobody is left to read a
// graceful ending; any other cancellation keeps the grace.
var ErrClientGone = errors.New("supervisor: the client is gone")

// ErrClosed is returned, wrapped, by Run, Jobs.Start and every other call that
// would start a command once Close has begun. The error also matches
// killtree.ErrClosed, which it was before ErrClosed existed.
var ErrClosed = errors.New("supervisor: closed")

// errClosed is the error a start after Close returns.
var errClosed = fmt.Errorf("%w (%w)", ErrClosed, killtree.ErrClosed)

// Run runs r to completion and returns its Result. A Request that fails
// validation returns an error wrapping ErrInvalidRequest before anything
// starts, and so does a command and environment the kernel refuses to exec
// for their size (E2BIG); after Close it returns an error wrapping
// ErrClosed, and a failure to start the shell returns an error too. Once the
// command ran, Run returns a Result and a nil error whatever the command's
// exit code. Cancelling ctx aborts the command: its tree is killed (SIGTERM
// and the grace first, unless the cause is ErrClientGone) and the Result
// has Aborted set. Run is safe for concurrent use; while a command
// runs, Run holds an OS thread in a blocking system call (as os/exec's Wait
// does), on Linux until the command ends or proves busy.
func (s *Supervisor) Run(ctx context.Context, r Request) (Result, error) {
	v, err := s.validate(r)
	if err != nil {
		return Result{}, err
	}
	if v.Yield > 0 || v.tty != nil {
		// A command on a terminal runs as an unlisted job even without a
		// yield: its waiting watch is a job's (docs/terminals.md).
		return s.runYielding(ctx, v)
	}
	p, err := s.start(v)
	if err != nil {
		return Result{}, err
	}
	return p.finish(p.supervise(ctx)), nil
}

// proc is one running command and everything its lifecycle owns.
type proc struct {
	s         *Supervisor
	v         validated
	id        string
	log       zerolog.Logger
	begin     time.Time
	cmd       *exec.Cmd
	tree      *killtree.Tree
	out, err  *retained
	outs      outputs          // the read ends of stdout and stderr (per OS)
	stdinW    *os.File         // nil when stdin is /dev/null; the terminal's master with a tty
	term      *terminal        // the command's terminal; nil for pipes
	screen    *screen          // the terminal's screen; nil for pipes
	stdinEnd  chan struct{}    // closed when the stdin writer returned
	state     *stateStart      // nil unless the command carries session state
	jst       *journal.Started // its journal entry; nil without one
	jfail     error            // why the journal did not take its entry; nil when it did or there is none
	drained   chan error       // one value per stream drained in the background at its end; buffered 2
	pending   int              // how many values drained will carry
	live      *live
	kill      KillInfo
	sent      string // the signal the way down sent last
	deletions uint64 // its session's deletion count when it began (busy)

	// atEnd, when set, learns why the command stopped before the way down
	// begins; waitAtEnd is the wait it was in when its timeout passed.
	atEnd     func(ending)
	waitAtEnd *Waiting

	strays       int                // what the way down killed that this or an ended command left (killtree.Report.Strays)
	unattributed []killtree.Process // what it left: born while this and another running command ran
}

func (s *Supervisor) newID() string {
	return "c-" + strconv.FormatInt(int64(os.Getpid()), 36) + "-" + strconv.FormatUint(s.seq.Add(1), 36)
}

// supervise drains the command until the shell exits, the timeout passes or
// the context is cancelled (wait, per OS), and then takes the tree down. It
// returns why the command ended.
func (p *proc) supervise(ctx context.Context) ending {
	end := p.wait(ctx)
	p.log.Debug().Int("end", int(end)).Msg("stopping")
	if p.atEnd != nil {
		p.atEnd(end)
	}

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
		if end != endAborted || !errors.Is(context.Cause(ctx), ErrClientGone) {
			p.graceful(ctx)
		}
	}
	// From here the way down is bounded whatever the command did (froze
	// its processes, sleeps in the kernel): what outlives it is reported
	// as a survivor, not waited for.
	down := time.Now()
	report, err := p.tree.KillBy(down.Add(killLimit))
	if err != nil {
		p.log.Warn().Err(err).Int("survivors", report.Survivors).Msg("kill")
	} else {
		p.log.Debug().Int("killed", report.Processes).Int("escapees", report.Escapees).
			Dur("took", report.Duration).Msg("tree confirmed empty")
	}
	if report.Processes > 0 {
		p.sent = "SIGKILL"
	}
	// What corral killed at an OOM notification (cgroup v1) is gone
	// before this kill; a member Stop counted is not counted twice.
	p.kill.Processes = max(p.kill.Processes, report.Processes+p.tree.OOMKilled())
	p.kill.Escapees += report.Escapees
	if end == endExited {
		// The shell had exited by itself: whatever was killed after it,
		// in the containment or out of it, was left running behind it.
		p.kill.Lingering = max(p.kill.Lingering, report.Processes)
	}
	p.kill.Tier = string(report.Tier)
	p.strays, p.unattributed = report.Strays, report.Unattributed
	if report.Strays > 0 || len(report.Unattributed) > 0 {
		p.log.Warn().Int("strays", report.Strays).Int("unattributed", len(report.Unattributed)).
			Msg("processes born while two commands ran")
	}
	p.drainAll(end, down.Add(downLimit), err != nil)
	return end
}

// finish reaps the shell, releases everything and builds the Result. The
// result event is the last event the callback receives.
func (p *proc) finish(end ending) Result {
	werr := p.reap()
	defer func() {
		if p.s.running.Add(-1) == 0 && p.s.cfg.ReturnIdleMemory {
			p.s.wentIdle()
		}
	}()
	// Read before Close removes the containment that keeps them.
	usage, reached := p.tree.Usage(), p.tree.Reached()
	alive := p.tree.Survivors()
	if len(alive) == 0 {
		if err := p.tree.Close(); err != nil {
			p.log.Warn().Err(err).Msg("close containment")
		}
	} else {
		p.s.finishLater(p.tree, p.log)
	}
	p.kill.Survivors = len(alive)
	// A survivor was counted among the members the way down signalled;
	// it was not killed.
	p.kill.Processes = max(0, p.kill.Processes-len(alive))
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
		Limit:      string(reached),
		Usage:      usageOf(usage),
	}
	for _, l := range p.tree.NotEnforced() {
		res.LimitsNotEnforced = append(res.LimitsNotEnforced, string(l))
	}
	code, sig := exitStatus(p.cmd.ProcessState)
	if c, s, ok := shellExit(p.tree); ok { // the leader was the shell's reaper
		code, sig, werr = c, s, nil
	}
	exitedByItself := end == endExited && sig == "" && (werr == nil || p.cmd.ProcessState != nil)
	cwd, stateNote := p.s.finishState(p.state, exitedByItself)
	res.Cwd = cwd
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
	res.Stdout, res.StdoutInfo = p.shape(p.out, Stdout)
	res.Stderr, res.StderrInfo = p.shape(p.err, Stderr)
	if p.screen != nil {
		var note string
		res.Stdout, res.StdoutInfo, note = p.screenView(res.Stdout, res.StdoutInfo)
		res.Stderr = withNote(res.Stderr, note)
		p.screen.close()
	}
	res.Stderr = withNote(withNote(res.Stderr, stateNote), p.s.note(end, p.v, p.kill, alive))
	res.Stderr = withNote(res.Stderr, limitNote(reached, p.tree))
	res.Stderr = withNote(res.Stderr, strayNote(p.strays, p.unattributed))
	if w := p.waitAtEnd; w != nil {
		res.Waiting = w
		res.Stderr = withNote(res.Stderr, fmt.Sprintf("[corral: when its timeout passed it was %s. "+
			"Run it with yield (or as a job) to answer it, or give it its input another way.]", w.Describe()))
	}
	res.Truncated = res.StdoutInfo.Truncated || res.StderrInfo.Truncated
	p.journalFinish(&res)
	p.s.busy(p.v.Session, -1)

	if p.v.OnEvent != nil {
		r := res
		p.v.OnEvent(Event{Event: EventResult, Result: &r})
	}
	p.logResult(res)
	return res
}

// errShellAlive says the shell itself survived the way down; see reap.
var errShellAlive = errors.New("supervisor: the shell survived the kill; not reaped")

// reap waits for the shell, unless the way down left it alive (a root
// command that froze itself where corral may not thaw it): waiting would
// hold the Result for as long as it stays frozen. The Result then reports
// the shell among the survivors, and its zombie, once it dies, is never
// reaped.
func (p *proc) reap() error {
	for _, s := range p.tree.Survivors() {
		if s.Pid == p.tree.Pid() {
			return errShellAlive
		}
	}
	return p.cmd.Wait()
}

// shape builds the model view of one stream, spilling the retained bytes
// first when the view will be cut. A failed spill costs only the spill
// sentence.
func (p *proc) shape(r *retained, name Stream) (string, budget.Info) {
	data, counts, stream := r.snapshot()
	opts := budget.Options{Policy: r.policy, Limits: p.s.cfg.Budget, Raw: p.s.cfg.RawOutput}
	view, info := budget.Shape(data, counts, opts)
	if !info.Truncated || p.s.spills == nil || len(data) == 0 {
		return view, info
	}
	label := p.v.Label
	if len(label) > 120 {
		label = label[:120]
	}
	p.s.js.spillMu.RLock()
	if p.s.sessionDeleted(p.v.Session, p.deletions) {
		p.s.js.spillMu.RUnlock()
		return view, info // the session was deleted while the command ran
	}
	path, err := p.s.spills.WriteStream(p.v.Session, label+"."+string(name), stream)
	p.s.js.spillMu.RUnlock()
	if err != nil {
		p.log.Warn().Err(err).Str("stream", string(name)).Msg("spill")
		return view, info
	}
	ext := p.s.spills.Extent(stream)
	opts.SpillPath = path
	opts.SpillKept = budget.SpillKept{HeadBytes: ext.HeadBytes, TailBytes: ext.TailBytes, StreamBytes: ext.StreamBytes}
	return budget.Shape(data, counts, opts)
}

// logResult is the one info line of a finished command (its logger carries
// id, session and label): how it ended, how long it took, the bytes of each
// stream, the tier and the kill counts. Never the command, its environment
// or its output, which may hold secrets.
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
		Int("escapees", res.Kill.Escapees).
		Int("survivors", res.Kill.Survivors)
	if p.v.job {
		ev = ev.Bool("job", true)
	}
	if res.Kill.PipesForced {
		ev = ev.Bool("pipesForced", true)
	}
	if res.ExitCode != nil {
		ev = ev.Int("exit", *res.ExitCode)
	} else {
		ev = ev.Str("signal", res.Signal)
	}
	ev.Msg("command")
}

// maxArgStrlen is Linux's MAX_ARG_STRLEN (32 pages of 4 KiB): the most one
// argument or one NAME=value may hold (include/uapi/linux/binfmts.h).
const maxArgStrlen = 32 * 4096

// argSizeError is the request error for a command the kernel refused to
// exec for its size (E2BIG, execve(2)): the command string and the
// environment together exceed ARG_MAX, or on Linux one of them exceeds
// MAX_ARG_STRLEN. Nothing ran; err stays reachable through errors.Is.
func argSizeError(cmd *exec.Cmd, err error) error {
	env := 0
	for _, e := range cmd.Env {
		env += len(e) + 1
	}
	command := cmd.Args[len(cmd.Args)-1]
	return &RequestError{Err: err, Reason: fmt.Sprintf("the command (%d bytes) and its environment (%d bytes) "+
		"exceed the kernel's argument size limit (ARG_MAX for all of them together; on Linux also %d KiB "+
		"for any one argument or variable, MAX_ARG_STRLEN); pass large input through stdin or a file",
		len(command), env, maxArgStrlen>>10)}
}
