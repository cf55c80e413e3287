package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Background job limits.
const (
	DefaultJobLifetime    = 30 * time.Minute
	DefaultMaxJobLifetime = 24 * time.Hour
	DefaultJobRetention   = 10 * time.Minute
	DefaultMaxJobs        = 32
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
	// ErrNotFound: no job has that ID (it never existed, or it exited and
	// its retention passed). NOT_FOUND.
	ErrNotFound = errors.New("supervisor: no such job")
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
	// Interactive keeps stdin an open pipe that JobInput writes to; else
	// stdin is Request.Stdin or /dev/null.
	Interactive bool
}

// JobStarted is what StartJob returns.
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
}

// JobOutput is one cursor read of a job's stream. After is the cursor the
// reader passed, Next the one to pass next time (byte offsets in the
// stream); SkippedBytes is what the reader missed because the tail ring had
// moved past After. Result is set once the job has exited.
type JobOutput struct {
	ID           string  `json:"id"`
	Stream       string  `json:"stream"`
	Data         string  `json:"data"`
	After        int64   `json:"after"`
	Next         int64   `json:"next"`
	SkippedBytes int64   `json:"skippedBytes"`
	State        string  `json:"state"`
	Result       *Result `json:"result,omitempty"`
}

// job is one background job.
type job struct {
	id      string
	command string
	started time.Time
	p       *proc
	cancel  context.CancelFunc
	done    chan struct{} // closed once result is set

	mu     sync.Mutex
	wake   chan struct{} // guarded by mu; closed and replaced on new output
	result Result        // set before done is closed

	stdinMu sync.Mutex // serialises JobInput
}

// jobTable holds the jobs of one Supervisor.
type jobTable struct {
	max         int
	maxLifetime time.Duration
	retention   time.Duration

	mu      sync.Mutex
	jobs    map[string]*job // guarded by mu
	running int             // guarded by mu
	closed  bool            // guarded by mu
	closeCh chan struct{}   // guarded by mu; closed by closeAll
	wg      sync.WaitGroup  // one per job's supervising goroutine
}

func (t *jobTable) init(cfg Config) error {
	t.max, t.maxLifetime, t.retention = cfg.MaxJobs, cfg.MaxJobLifetime, cfg.JobRetention
	if t.max <= 0 {
		t.max = DefaultMaxJobs
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

// StartJob validates r like Run does, starts it in the background and
// returns at once. The job is killed when its lifetime passes, by KillJob,
// or by Close. Errors: ErrInvalidRequest, ErrTooManyJobs, or a start failure.
func (s *Supervisor) StartJob(r JobRequest) (JobStarted, error) {
	lifetime := r.Lifetime
	if lifetime == 0 {
		lifetime = r.Timeout
	}
	req := r.Request
	req.Timeout = 0 // the lifetime replaces it; validated below
	v, err := s.validate(req)
	if err != nil {
		return JobStarted{}, err
	}
	switch {
	case lifetime == 0:
		lifetime = DefaultJobLifetime
	case lifetime < MinTimeout || lifetime > s.jobs.maxLifetime:
		return JobStarted{}, invalid("lifetime must be between %g and %g seconds, got %g",
			MinTimeout.Seconds(), s.jobs.maxLifetime.Seconds(), lifetime.Seconds())
	}
	if r.Interactive && r.Stdin != nil {
		return JobStarted{}, invalid("an interactive job takes its stdin through job input, not stdin")
	}
	v.timeout, v.job, v.interactive = lifetime, true, r.Interactive

	j := &job{id: newJobID(), command: r.Command, started: time.Now(), done: make(chan struct{}), wake: make(chan struct{})}
	v.notify = j.poke
	t := &s.jobs
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return JobStarted{}, errors.New("supervisor: closed")
	}
	if t.running >= t.max {
		t.mu.Unlock()
		return JobStarted{}, jobError(ErrTooManyJobs, "%d background jobs are running, the most allowed; kill one or wait for one to end", t.max)
	}
	t.running++
	t.mu.Unlock()

	p, err := s.start(v)
	if err != nil {
		t.mu.Lock()
		t.running--
		t.mu.Unlock()
		return JobStarted{}, err
	}
	j.p = p
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	t.mu.Lock()
	t.jobs[j.id] = j
	t.wg.Add(1)
	t.mu.Unlock()
	go t.supervise(ctx, j)
	return JobStarted{ID: j.id, Pid: p.tree.Pid()}, nil
}

// supervise runs one job to its end, publishes the result, and forgets the
// job after the retention.
func (t *jobTable) supervise(ctx context.Context, j *job) {
	defer t.wg.Done()
	res := j.p.finish(j.p.supervise(ctx))
	j.cancel()
	// The slot is free before anyone learns the job ended, so a start
	// right after KillJob or WaitJob is never refused for it.
	t.mu.Lock()
	t.running--
	closed := t.closed
	t.mu.Unlock()
	j.mu.Lock()
	j.result = res
	j.mu.Unlock()
	close(j.done)
	j.poke()
	if closed {
		return
	}
	forget := time.NewTimer(t.retention)
	defer forget.Stop()
	select {
	case <-forget.C:
	case <-t.closing():
	}
	t.mu.Lock()
	delete(t.jobs, j.id)
	t.mu.Unlock()
}

// closing returns a channel closed by closeAll; built lazily.
func (t *jobTable) closing() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closeCh == nil {
		t.closeCh = make(chan struct{})
		if t.closed {
			close(t.closeCh)
		}
	}
	return t.closeCh
}

// closeAll kills every job and waits for their supervising goroutines.
func (t *jobTable) closeAll() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	if t.closeCh != nil {
		close(t.closeCh)
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
		return nil, jobError(ErrNotFound, "no job %q: it never existed, or it exited and its retention passed", id)
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
	if _, ok := j.exited(); ok {
		state = JobExited
	}
	return JobInfo{ID: j.id, Command: j.command, State: state, Pid: j.p.tree.Pid(), StartedAt: j.started,
		StdoutBytes: j.p.out.tail.Counts().TotalBytes, StderrBytes: j.p.err.tail.Counts().TotalBytes}
}

// Jobs lists every job, running or retained, oldest first.
func (s *Supervisor) Jobs() []JobInfo {
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

// WaitJob waits until the job ended and returns its Result, or returns
// ErrStillRunning once timeout passed (0 waits as long as ctx allows).
func (s *Supervisor) WaitJob(ctx context.Context, id string, timeout time.Duration) (Result, error) {
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

// KillJob kills the job's whole tree (SIGTERM, grace, SIGKILL) and returns
// its Result. Killing a job that already exited returns its Result.
func (s *Supervisor) KillJob(id string) (Result, error) {
	j, err := s.jobs.get(id)
	if err != nil {
		return Result{}, err
	}
	j.cancel()
	<-j.done
	r, _ := j.exited()
	return *r, nil
}
