package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/corral-sh/corral/killtree"
)

// Background job limits.
const (
	DefaultJobLifetime    = 30 * time.Minute
	DefaultMaxJobLifetime = 24 * time.Hour
	DefaultJobRetention   = 10 * time.Minute
	DefaultMaxJobs        = 32
	// DefaultMaxRetainedJobs bounds the exited jobs kept readable.
	DefaultMaxRetainedJobs = 256
	// DefaultMaxRetainedBytes bounds the memory the exited jobs take (their
	// tail rings, their Results' views, their records and the runtime's
	// overhead on them), all together.
	DefaultMaxRetainedBytes = 64 << 20
	// MaxOutputWait bounds one long-poll read of a job's output.
	MaxOutputWait = 30 * time.Second
)

// Job states.
const (
	JobRunning = "running"
	JobExited  = "exited"
)

// Errors of the job API; each maps to a wire code.
var (
	// ErrNotFound: no job has that ID: it never existed, or it exited and
	// was forgotten (then the error also matches ErrJobExpired). NOT_FOUND.
	ErrNotFound = errors.New("supervisor: no such job")
	// ErrJobExpired: the job existed, exited, and is no longer kept: its
	// retention passed, or it was evicted, oldest first, to keep the exited
	// jobs within MaxRetainedJobs and MaxRetainedBytes. Errors that match it
	// also match ErrNotFound. A bounded record of forgotten IDs tells them
	// from IDs that never existed; an ID forgotten long ago (more than
	// forgottenIDs since) is plain ErrNotFound.
	ErrJobExpired = fmt.Errorf("%w: the job expired", ErrNotFound)
	// ErrTooManyJobs: the live-job limit is reached. RESOURCE_EXHAUSTED.
	ErrTooManyJobs = errors.New("supervisor: too many background jobs")
	// ErrStillRunning: Wait's deadline passed before the job ended.
	ErrStillRunning = errors.New("supervisor: job still running")
	// ErrJobStdin: stdin cannot be written (not interactive, closed, or the
	// job ended). INVALID_ARGUMENT.
	// It also matches ErrInvalidRequest.
	ErrJobStdin = errors.New("supervisor: job stdin")
)

// JobError is a job operation refused for a reason callers branch on. Kind
// is ErrNotFound, ErrTooManyJobs or ErrStillRunning, and errors.Is matches
// it; Reason is the message without the package prefix, as wire errors
// carry it ("no job \"j-1\": ...").
type JobError struct {
	Kind   error
	Reason string
}

func (e *JobError) Error() string { return "supervisor: " + e.Reason }

// Is reports whether target is e.Kind.
func (e *JobError) Is(target error) bool { return target == e.Kind }

// Unwrap returns e.Kind, so that what Kind matches, e matches too
// (ErrJobExpired is also ErrNotFound).
func (e *JobError) Unwrap() error { return e.Kind }

// jobError returns a *JobError of kind with a formatted reason.
func jobError(kind error, format string, args ...any) error {
	return &JobError{Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

// JobRequest starts a background job: the same Request as a command, plus
// its lifetime and whether its stdin stays open.
type JobRequest struct {
	Request
	// Lifetime bounds how long the job may run before it is killed like a
	// timed-out command; 0 is Request.Timeout when set, else
	// DefaultJobLifetime. It must lie in 1 s to the supervisor's
	// MaxJobLifetime.
	Lifetime time.Duration
	// Interactive keeps stdin an open pipe that Jobs.Input writes to; else
	// stdin is Request.Stdin or /dev/null.
	Interactive bool
}

// JobStarted is what Jobs.Start returns.
type JobStarted struct {
	ID  string `json:"id"`
	Pid int    `json:"pid"`
}

// JobInfo describes one job in a listing.
type JobInfo struct {
	ID          string    `json:"id"`
	Command     string    `json:"command"`
	State       string    `json:"state"`
	Pid         int       `json:"pid"`
	StartedAt   time.Time `json:"startedAt"`
	StdoutBytes int64     `json:"stdoutBytes"`
	StderrBytes int64     `json:"stderrBytes"`
	// TTY is the terminal's size for a job run on a PTY; nil for pipes.
	TTY *TTYSize `json:"tty,omitempty"`
	// Waiting is set while the job is blocked reading its input
	// (docs/terminals.md); nil otherwise, and always once it exited.
	Waiting *Waiting `json:"waiting,omitempty"`
	// Usage is what the job's tree used so far: live from the
	// containment's accounting while it runs (on pgroup, where there is
	// none, the CPU time and peak of the processes the tree already
	// reaped), the final Result's once it exited.
	Usage *Usage `json:"usage,omitempty"`
}

// JobOutput is one cursor read of a job's stream. After is the cursor the
// reader passed, Next the one to pass next time (byte offsets in the
// stream); SkippedBytes is what the reader missed because the tail ring had
// moved past After. Result is set once the job has exited.
type JobOutput struct {
	ID           string `json:"id"`
	Stream       Stream `json:"stream"`
	Data         string `json:"data"`
	After        int64  `json:"after"`
	Next         int64  `json:"next"`
	SkippedBytes int64  `json:"skippedBytes"`
	State        string `json:"state"`
	// Waiting is set while the job is blocked reading its input.
	Waiting *Waiting `json:"waiting,omitempty"`
	// Screen, on a stdout read of a terminal job whose stream is a
	// full-screen program's (the rule of a Result's view:
	// docs/terminals.md), is the screen as it is at the read's end, which
	// is what a person sees; Data keeps the bytes that drew it.
	Screen *Screen `json:"screen,omitempty"`
	Result *Result `json:"result,omitempty"`
}

// job is one background job. What it keeps once it exited is its capture's
// tail rings and its Result: the command's proc (its exec.Cmd, environment,
// containment, logger) is dropped at its end, so a retained job costs its
// output and a small record (jobRecordBytes).
type job struct {
	id          string
	command     string
	session     string
	owner       string // Request.Owner
	started     time.Time
	pid         int
	interactive bool
	stdinW      *os.File  // an interactive job's stdin; nil otherwise
	out, err    *retained // the capture of stdout and stderr
	cancel      context.CancelFunc
	// cancelCause aborts the job with a cause (a yielding command whose
	// caller went away passes the caller's).
	cancelCause context.CancelCauseFunc
	done        chan struct{} // closed once result is set
	listed      bool          // in the table; guarded by the table's mu

	cursorMu sync.Mutex // serialises cursorless reads
	cursor   [2]int64   // where the next cursorless read of stdout, stderr starts; guarded by cursorMu

	// Set by the table when the job joins the exited jobs, under its mu.
	ended     time.Time
	footprint int64 // bytes its retained output takes

	mu     sync.Mutex
	wake   chan struct{}  // guarded by mu; closed and replaced on new output
	tree   *killtree.Tree // guarded by mu; the running tree, for live usage; nil once it exited
	result Result         // set before done is closed

	stdinMu     sync.Mutex // serialises Jobs.Input
	stdinClosed bool       // Jobs.Input closed stdin; under stdinMu

	watch      *inputWatch // finds out when the job waits for input; nil when not watched
	waiting    *Waiting    // guarded by mu; the current wait, nil when none
	waits      uint64      // guarded by mu; counts the waits so far
	tty        *TTYSize    // the terminal's size (guarded by mu); nil for pipes
	term       *terminal   // the job's terminal; nil for pipes
	screen     *screen     // its screen while it runs (guarded by mu); nil for pipes and once it ended
	lastScreen *Screen     // guarded by mu; the screen a terminal job left
	lastTUI    bool        // guarded by mu; it was a full-screen program's (screen.tui)
	proc       *proc       // the job's command while it runs, for its screen and Yield's views; guarded by mu, nil once it ended
}

// forgottenIDs is how many forgotten job IDs the table remembers, to answer
// ErrJobExpired rather than a bare ErrNotFound (about 40 bytes each).
const forgottenIDs = 4096

// jobTable holds the jobs of one Supervisor.
type jobTable struct {
	max         int
	maxLifetime time.Duration
	retention   time.Duration
	maxRetained int   // exited jobs kept at most
	maxBytes    int64 // bytes their output may take, all together

	mu        sync.Mutex
	jobs      map[string]*job // guarded by mu
	running   int             // guarded by mu
	live      map[*job]bool   // guarded by mu; the running jobs, until they release their captures
	closed    bool            // guarded by mu
	exited    []*job          // guarded by mu; retained exited jobs, oldest end first
	exitBytes int64           // guarded by mu; their footprints summed
	sweep     *time.Timer     // guarded by mu; forgets exited[0] when its retention passed
	forgotten forgetLog       // guarded by mu
	feed      jobFeed         // job events (jobevents.go)
	wg        sync.WaitGroup  // one per job's supervising goroutine
}

func (t *jobTable) init(cfg Config) error {
	t.max, t.maxLifetime, t.retention = cfg.MaxJobs, cfg.MaxJobLifetime, cfg.JobRetention
	t.maxRetained, t.maxBytes = cfg.MaxRetainedJobs, cfg.MaxRetainedBytes
	if t.max <= 0 {
		t.max = DefaultMaxJobs
	}
	switch {
	case t.maxRetained < 0:
		return fmt.Errorf("supervisor: max retained jobs must be 0 (the default) or more, got %d", t.maxRetained)
	case t.maxRetained == 0:
		t.maxRetained = DefaultMaxRetainedJobs
	}
	switch {
	case t.maxBytes < 0:
		return fmt.Errorf("supervisor: max retained bytes must be 0 (the default) or more, got %d", t.maxBytes)
	case t.maxBytes == 0:
		t.maxBytes = DefaultMaxRetainedBytes
	}
	if t.maxLifetime <= 0 {
		t.maxLifetime = DefaultMaxJobLifetime
	}
	if t.maxLifetime < MinTimeout {
		return fmt.Errorf("supervisor: max job lifetime must be at least %v, got %v", MinTimeout, t.maxLifetime)
	}
	if t.retention <= 0 {
		t.retention = DefaultJobRetention
	}
	t.jobs = map[string]*job{}
	return nil
}

// Start validates r like Run does, starts it in the background and
// returns at once. The job is killed when its lifetime passes, by Jobs.Kill,
// or by Close. Errors: ErrInvalidRequest, ErrTooManyJobs, ErrClosed after
// Close, or a start failure.
func (h *Jobs) Start(r JobRequest) (JobStarted, error) {
	s := h.s
	lifetime := r.Lifetime
	if lifetime == 0 {
		lifetime = r.Timeout
	}
	req := r.Request
	if req.Yield != 0 {
		return JobStarted{}, invalid("yield applies to commands; a background job returns at once")
	}
	req.Timeout = 0 // the lifetime replaces it; validated below
	v, err := s.validate(req)
	if err != nil {
		return JobStarted{}, err
	}
	if lifetime == 0 {
		lifetime = DefaultJobLifetime
	} else if _, err := checkTimeout("lifetime", lifetime.Seconds(), s.jobs.maxLifetime); err != nil {
		return JobStarted{}, err
	}
	if r.Interactive && r.Stdin != nil {
		return JobStarted{}, invalid("an interactive job takes its stdin through job input, not stdin")
	}
	v.timeout, v.job, v.interactive = lifetime, true, r.Interactive || v.tty != nil
	j, _, err := s.launchJob(v, true)
	if err != nil {
		return JobStarted{}, err
	}
	return JobStarted{ID: j.id, Pid: j.pid}, nil
}

// launchJob takes a running-job slot, starts v and supervises it in the
// background. A listed job is in the table at once; a yielding command's
// job joins it only at the yield (listJob), so a command that ends before
// its yield never shows up as a job. Only the caller and the supervising
// goroutine hold the returned proc; the job drops it when it ends.
func (s *Supervisor) launchJob(v validated, listed bool) (*job, *proc, error) {
	j := &job{id: newJobID(), command: v.Command, session: v.Session, owner: v.Owner, started: time.Now(),
		interactive: v.interactive, done: make(chan struct{}), wake: make(chan struct{}), listed: listed}
	v.notify = j.poke
	v.grew = s.jobs.reclaim
	if v.interactive && canWatchInput {
		j.watch = newInputWatch()
		v.notify = func() { j.poke(); j.watch.output() }
	}
	t := &s.jobs
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, nil, errClosed
	}
	if t.running >= t.max {
		t.mu.Unlock()
		return nil, nil, jobError(ErrTooManyJobs, "%d background jobs are running, the most allowed; kill one or wait for one to end", t.max)
	}
	t.running++
	t.mu.Unlock()

	p, err := s.start(v)
	if err != nil {
		t.mu.Lock()
		t.running--
		t.mu.Unlock()
		return nil, nil, err
	}
	j.pid, j.stdinW, j.out, j.err, j.tree, j.proc = p.tree.Pid(), p.stdinW, p.out, p.err, p.tree, p
	if p.term != nil {
		j.term, j.tty, j.screen = p.term, v.tty, p.screen
	}
	if j.watch != nil {
		s.startWatch(j, p)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	j.cancel = func() { cancel(nil) }
	j.cancelCause = cancel
	t.mu.Lock()
	if listed {
		t.jobs[j.id] = j
	}
	if t.live == nil {
		t.live = map[*job]bool{}
	}
	t.live[j] = true
	t.wg.Add(1)
	t.mu.Unlock()
	go t.supervise(ctx, j, p)
	return j, p, nil
}

// listJob makes a yielding command's job visible at its yield. It reports
// false when the job already ended: the caller then returns its Result, and
// the job is never listed.
func (t *jobTable) listJob(j *job) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ended := j.exited(); ended || t.closed {
		return false
	}
	j.listed = true
	t.jobs[j.id] = j
	return true
}

// supervise runs one job to its end, publishes the result, and hands the
// job to the exited jobs, which forget it after the retention or sooner
// when the caps need its room.
func (t *jobTable) supervise(ctx context.Context, j *job, p *proc) {
	defer t.wg.Done()
	end := p.supervise(ctx)
	if j.watch != nil {
		j.watch.close() // the tree is gone: nothing waits any more
	}
	res := p.finish(end)
	j.cancel()
	// The slot is free before anyone learns the job ended, so a start
	// right after Jobs.Kill or Jobs.Wait is never refused for it.
	t.mu.Lock()
	t.running--
	delete(t.live, j) // before its captures are released (liveBytesLocked reads them)
	t.mu.Unlock()
	// What an exited job keeps: the tail rings that cursor reads use,
	// shrunk to their content, and its Result; the head capture served
	// the Result and goes.
	footprint := exitedFootprint(j.out.release()+j.err.release(), &res)
	j.mu.Lock()
	j.result, j.tree, j.proc = res, nil, nil
	if j.screen != nil {
		// An exited job keeps the last screen's text, not its emulator.
		sc := j.screen.snapshot()
		j.lastScreen, j.lastTUI, j.screen = &sc, j.screen.tui(), nil
	}
	j.mu.Unlock()
	// Retired before anyone learns the job ended, so that a caller woken by
	// its end sees the evictions its exit caused (a job it pushed out of
	// the caps already answers ErrJobExpired). A waiter already holding j
	// gets its Result even when j itself is evicted at once.
	t.retire(j, footprint)
	close(j.done)
	j.poke()
	t.mu.Lock()
	listed := j.listed // a command that ended before its yield was never a job
	t.mu.Unlock()
	if listed {
		r := res
		t.feed.publish(JobEvent{Event: JobEventExited, JobID: j.id, Owner: j.owner, At: time.Now(), Result: &r})
	}
}

// closeAll kills every job and waits for their supervising goroutines.
func (t *jobTable) closeAll() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	for _, j := range t.jobs {
		j.cancel()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

func (t *jobTable) get(id string) (*job, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.jobs[id]
	if !ok || j == nil {
		if why, ok := t.whyLocked(id); ok {
			return nil, &JobError{Kind: ErrJobExpired, Reason: fmt.Sprintf("job %s expired: %s", id, why)}
		}
		return nil, jobError(ErrNotFound, "no job %q", id)
	}
	return j, nil
}

func newJobID() string {
	var b [8]byte
	rand.Read(b[:])
	return "j-" + hex.EncodeToString(b[:])
}

// poke wakes every reader waiting for output or the end.
func (j *job) poke() {
	j.mu.Lock()
	close(j.wake)
	j.wake = make(chan struct{})
	j.mu.Unlock()
}

func (j *job) waiter() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.wake
}

// exited reports whether the job ended, and its result then.
func (j *job) exited() (*Result, bool) {
	select {
	case <-j.done:
		r := j.result
		return &r, true
	default:
		return nil, false
	}
}

func (j *job) info() JobInfo {
	state := JobRunning
	res, ok := j.exited()
	usage := func() *Usage {
		if ok {
			return res.Usage
		}
		j.mu.Lock()
		tree, final := j.tree, j.result.Usage
		j.mu.Unlock()
		if tree == nil { // it ended since
			return final
		}
		return usageOf(tree.LiveUsage())
	}()
	if ok {
		state = JobExited
	}
	w, _ := j.currentWait()
	return JobInfo{ID: j.id, Command: j.command, State: state, Pid: j.pid, StartedAt: j.started,
		StdoutBytes: j.out.tail.Counts().TotalBytes, StderrBytes: j.err.tail.Counts().TotalBytes, Usage: usage,
		TTY: j.size(), Waiting: w}
}

// List lists every job, running or retained, oldest first.
func (h *Jobs) List() []JobInfo {
	s := h.s
	s.jobs.mu.Lock()
	jobs := make([]*job, 0, len(s.jobs.jobs))
	for _, j := range s.jobs.jobs {
		jobs = append(jobs, j)
	}
	s.jobs.mu.Unlock()
	out := make([]JobInfo, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.info())
	}
	sort.Slice(out, func(a, b int) bool { return out[a].StartedAt.Before(out[b].StartedAt) })
	return out
}

// JobStatus is one job's status (GET /v1/jobs/{id}): its listing, and its
// Result once it exited.
type JobStatus struct {
	JobInfo
	Result *Result `json:"result,omitempty"`
}

// Status describes one job, running or retained, with its Result once it
// exited. Errors as Get's.
func (h *Jobs) Status(id string) (JobStatus, error) {
	j, err := h.s.jobs.get(id)
	if err != nil {
		return JobStatus{}, err
	}
	st := JobStatus{JobInfo: j.info()}
	if st.State == JobExited {
		st.Result, _ = j.exited()
	}
	return st, nil
}

// Get describes one job, running or retained. The error matches
// ErrNotFound when there is none, and ErrJobExpired too when it was
// forgotten.
func (h *Jobs) Get(id string) (JobInfo, error) {
	s := h.s
	j, err := s.jobs.get(id)
	if err != nil {
		return JobInfo{}, err
	}
	return j.info(), nil
}

// Wait waits until the job ended and returns its Result, or returns
// ErrStillRunning once timeout passed (0 waits as long as ctx allows).
func (h *Jobs) Wait(ctx context.Context, id string, timeout time.Duration) (Result, error) {
	s := h.s
	j, err := s.jobs.get(id)
	if err != nil {
		return Result{}, err
	}
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-j.done:
		r, _ := j.exited()
		return *r, nil
	case <-deadline:
		return Result{}, jobError(ErrStillRunning, "job %s still running after %s", id, seconds(timeout))
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Kill kills the job's whole tree (SIGTERM, grace, SIGKILL) and returns
// its Result. Killing a job that already exited returns its Result.
func (h *Jobs) Kill(id string) (Result, error) {
	s := h.s
	j, err := s.jobs.get(id)
	if err != nil {
		return Result{}, err
	}
	j.cancel()
	<-j.done
	r, _ := j.exited()
	return *r, nil
}
