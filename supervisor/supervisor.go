package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/spill"
)

// Lifecycle defaults.
const (
	DefaultGrace  = 2 * time.Second
	DefaultSettle = 250 * time.Millisecond
	// NoGrace in Config.Grace skips the graceful phase: SIGKILL at once.
	NoGrace time.Duration = -1
	// drainWait is how long the drain may take to reach EOF after the tree
	// was confirmed empty before the pipe-holder scan runs.
	drainWait = 500 * time.Millisecond
	// downLimit bounds the way down after the grace (the kill, the drain to
	// EOF, the pipe-holder scan), whatever the command did: a Result is due
	// at most timeout + grace + downLimit after the start, plus what the
	// Result itself takes to make. killLimit is the kill's share of it.
	downLimit = 1200 * time.Millisecond
	killLimit = 800 * time.Millisecond
	// scanLimit bounds one pipe-holder scan; one scan runs when the pipes
	// stay open, even past downLimit.
	scanLimit = 200 * time.Millisecond
)

// CaptureLimits is the capture ceiling per stream; zero fields take 512 KiB
// and 200,000 lines.
type CaptureLimits struct{ MaxBytes, MaxLines int }

// Config configures a Supervisor. The zero value is usable: bash (or sh),
// the strongest containment, 300 s ceiling, 2 s grace, 250 ms settle, no spill
// files (markers then say "Narrow the request to see more."), silent logs.
type Config struct {
	// Shell runs the command as `Shell -c COMMAND`; "" is bash from PATH, or
	// sh where bash is absent.
	Shell string
	// Emulator makes the terminal emulator of a command run with a
	// terminal (Request.TTY), which renders its screen (Jobs.Screen, the
	// Result of a full-screen program, a waiting prompt). nil: requests
	// with a terminal are refused. supervisor/vtemu has corral's
	// (charmbracelet/x/vt); supervisor does not import it, so that a
	// program that runs no terminal (corral run without --tty) does not
	// load an emulator.
	Emulator func(cols, rows int) Emulator
	// DataDir is where spill files go (<DataDir>/scratch/...); "" disables
	// spills. New creates it if missing and holds it open until Close
	// (spill.New): a directory renamed or replaced afterwards is not followed.
	DataDir string
	// SpillMaxBytes caps one spill file; 0 is spill.DefaultMaxBytes.
	SpillMaxBytes int64
	// MaxTimeout is the largest timeout a request may ask for; 0 is 300 s.
	// It may be raised up to CeilingTimeout.
	MaxTimeout time.Duration
	// Grace is the graceful phase of the way down; 0 is DefaultGrace,
	// NoGrace (negative) skips it.
	Grace time.Duration
	// Settle is how long a shell that exited may leave processes running
	// before they are killed as lingering; 0 is DefaultSettle.
	Settle time.Duration
	// Capture is the per-stream capture ceiling. A head+tail stream keeps
	// half of it at each end, so it too holds no more than the ceiling
	// (a background job also keeps a whole-ceiling tail ring for cursor
	// reads).
	Capture CaptureLimits
	// Budget is the per-stream model budget; zero fields are 96 KiB / 4,000 lines.
	Budget budget.Limits
	// LiveCap is how many bytes per stream live events carry; 0 is DefaultLiveCap.
	LiveCap int64
	// Scrub names variables that never reach a child (the server's token).
	Scrub []string
	// User, when non-empty, runs every command as this unprivileged user (a
	// login name or a numeric user ID): its user ID, primary group and
	// supplementary groups are set in the child before exec. New fails
	// unless this process is root and the user exists and is not root.
	// Commands then see the user's HOME, USER and LOGNAME (unless the
	// request sets them), and a request without Dir runs in the
	// supervisor's working directory if the user can enter it, else in the
	// user's home if it can enter that, else in "/". The containments, the
	// spill files and the data directory stay the supervisor's. "" runs
	// commands as this process's user.
	User string
	// AllowUsers names the users (login names or numeric IDs) a request
	// may run its command as (Request.User) besides User when User is set;
	// any other is refused (ErrInvalidRequest). Without User it changes
	// nothing. New fails when one does not exist or is root.
	AllowUsers []string
	// NoPromptSuppression leaves PAGER, EDITOR and friends as inherited.
	NoPromptSuppression bool
	// RawOutput turns off model-view clean-up (ANSI, \r redraws, binary).
	RawOutput bool
	// Containment configures killtree.
	Containment killtree.Config
	// TimeoutHint, when non-empty, is appended to the timeout line of a timed
	// out result (for example how to start a background job instead).
	TimeoutHint string
	// MaxJobs bounds the background jobs running at once; 0 is DefaultMaxJobs.
	MaxJobs int
	// MaxJobLifetime is the longest lifetime a job may ask for; 0 is
	// DefaultMaxJobLifetime.
	MaxJobLifetime time.Duration
	// JobRetention is how long an exited job stays readable; 0 is
	// DefaultJobRetention.
	JobRetention time.Duration
	// NoSessionState makes named sessions stateless: they only name spill
	// directories (the CLI, where each invocation is its own process).
	NoSessionState bool
	// MaxSessions bounds the sessions that keep state; past it the least
	// recently used idle session is forgotten. 0 is DefaultMaxSessions.
	MaxSessions int
	// MaxRetainedJobs bounds the exited jobs kept readable; past it the
	// job that exited first is forgotten (ErrJobExpired). 0 is
	// DefaultMaxRetainedJobs.
	MaxRetainedJobs int
	// MaxRetainedBytes bounds the memory the exited jobs take, all
	// together: their tail rings, shrunk to their content, and their
	// Results' views, as the allocator rounds them (to its size class, or
	// to whole 8 KiB pages), plus a record of 4 KiB each, plus 1/16 of
	// these for the Go runtime's overhead on the heap holding them, and
	// with them the capture buffers the running jobs hold when a job exits
	// (their head and tail buffers as allocated); past it the job that
	// exited first is forgotten (a running job never is). 0 is
	// DefaultMaxRetainedBytes.
	MaxRetainedBytes int64
	// ReturnIdleMemory returns the heap's free memory to the system once no
	// command has run for a second (at most every 10 s), so that a
	// long-running server's RSS falls back to what it holds after a burst
	// instead of keeping the runtime's headroom (up to twice the live heap).
	// It calls debug.FreeOSMemory, which acts on the whole process: for
	// servers, not for a library inside a larger program.
	ReturnIdleMemory bool
	// Journal, when not nil, records every Result (commands and jobs) in
	// its session's journal: an entry is written as started before the
	// shell starts and completed with the Result before Run returns (and
	// before the result event); Result.ID names it. New completes the
	// entries a previous process left started (Result.Interrupted), sweeps
	// the sessions idle past the journal's retention (with their spills
	// and state) and does so hourly until Close. A session's working
	// directory is kept in it, so a session resumes there after a restart.
	// The caller opens it before New and closes it after Close. nil: no
	// journal (Results have no ID).
	Journal *journal.Journal
	// Logger receives one line per command at info level and lifecycle steps
	// at debug level; nil is silent.
	Logger *zerolog.Logger
}

// Supervisor runs commands. It is safe for concurrent use; Close kills
// whatever is still running.
type Supervisor struct {
	cfg        Config
	shell      string
	maxTimeout time.Duration
	grace      time.Duration
	settle     time.Duration
	liveCap    int64
	trees      *killtree.Manager
	spills     *spill.Store     // nil when spills are disabled
	journal    *journal.Journal // nil when off
	js         journalState
	closing    atomic.Bool  // Close has begun: commands that end now were aborted
	devMu      sync.RWMutex // held for reading by every start, for writing by Close
	devNull    *os.File     // every command's stdin unless it is given one; nil once closed
	log        zerolog.Logger
	seq        atomic.Uint64
	user       *runAs   // nil: commands run as this process's user
	allowed    []string // the login names of Config.AllowUsers, when user is set

	maxLifetime time.Duration
	jobs        jobTable
	sessions    sessionTable
	running     atomic.Int64
	started     atomic.Int64
	drained     atomic.Int64

	// noPollLoop makes wait take its fallback on Linux (the tree's exit
	// watcher and the background pump from the start), as when no pidfd or
	// eventfd can be had. Set by tests only, before the first Run.
	noPollLoop bool
	// statePipe makes session state take the portable pipe channel on
	// Linux too. Set by tests only, before the first Run.
	statePipe bool

	idleMem idleMemory // Config.ReturnIdleMemory

	waitHooks hooks[func(string, Waiting)] // OnWaiting

	later sync.WaitGroup // background kills of trees whose way down gave up (finishLater)
}

// Stats are running totals since New, for metrics. Safe for concurrent use.
type Stats struct {
	Running      int64 // commands running now
	Started      int64 // commands started
	DrainedBytes int64 // bytes drained from all pipes
	// JournalErrors counts journal writes that failed (the Results went
	// out without them).
	JournalErrors int64
	// JournalOffline is set once a storage fault took the journal offline
	// (journal.ErrOffline): until a restart no Result is journaled.
	JournalOffline bool
}

// Stats returns the running totals.
func (s *Supervisor) Stats() Stats {
	return Stats{Running: s.running.Load(), Started: s.started.Load(), DrainedBytes: s.drained.Load(),
		JournalErrors: s.js.errors.Load(), JournalOffline: s.journal != nil && s.journal.Offline() != nil}
}

// New validates cfg, detects the containment and returns a Supervisor.
func New(cfg Config) (*Supervisor, error) {
	s := &Supervisor{cfg: cfg, shell: cfg.Shell, maxTimeout: cfg.MaxTimeout,
		grace: cfg.Grace, settle: cfg.Settle, liveCap: cfg.LiveCap, log: zerolog.Nop()}
	if cfg.Logger != nil {
		s.log = *cfg.Logger
	}
	switch {
	case s.maxTimeout == 0:
		s.maxTimeout = MaxTimeout
	case s.maxTimeout < MinTimeout || s.maxTimeout > CeilingTimeout:
		return nil, fmt.Errorf("supervisor: max timeout must be between %v and %v, got %v", MinTimeout, CeilingTimeout, s.maxTimeout)
	}
	switch {
	case s.grace == 0:
		s.grace = DefaultGrace
	case s.grace < 0:
		s.grace = 0
	}
	if s.settle <= 0 {
		s.settle = DefaultSettle
	}
	if s.liveCap <= 0 {
		s.liveCap = DefaultLiveCap
	}
	if err := checkOwnLimits(cfg.Containment); err != nil {
		return nil, err
	}
	if err := s.jobs.init(cfg); err != nil {
		return nil, err
	}
	s.maxLifetime = s.jobs.maxLifetime
	s.sessions.init(cfg.MaxSessions)
	if s.shell == "" {
		s.shell = "sh"
		if p, err := exec.LookPath("bash"); err == nil {
			s.shell = p
		}
	}
	if _, err := exec.LookPath(s.shell); err != nil {
		return nil, fmt.Errorf("supervisor: shell %q: %w", s.shell, err)
	}
	if cfg.User != "" {
		u, err := lookupRunAs(cfg.User)
		if err != nil {
			return nil, err
		}
		s.user = u
		for _, name := range cfg.AllowUsers {
			a, err := lookupRunAs(name)
			if err != nil {
				return nil, fmt.Errorf("supervisor: allowed user: %w", err)
			}
			s.allowed = append(s.allowed, a.name)
		}
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	trees, err := killtree.New(cfg.Containment)
	if err != nil {
		devNull.Close()
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	if cfg.DataDir != "" {
		// Opened now, before any command runs, and held: spills are
		// written and read beneath this descriptor (spill.Store).
		s.spills, err = spill.New(cfg.DataDir, spill.Options{MaxBytes: cfg.SpillMaxBytes})
		if err != nil {
			trees.Close()
			devNull.Close()
			return nil, fmt.Errorf("supervisor: %w", err)
		}
	}
	s.trees, s.devNull = trees, devNull
	s.journal = cfg.Journal
	if err := s.openJournal(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close kills every background job and every tree still running, and
// releases the containment machinery. Runs in progress return as aborted or
// fail. It waits for the background kills of trees whose way down left
// survivors (at most 30 s each). Idempotent.
func (s *Supervisor) Close() error {
	s.closing.Store(true)
	s.idleMem.stop()
	s.closeJournal()
	s.jobs.closeAll()
	s.later.Wait()
	err := s.trees.Close()
	s.later.Wait() // Runs that trees.Close ended
	// No start is using the descriptor once the lock is ours: closed
	// under a fork in progress, its number could be reused by another
	// open and reach that child as its stdin.
	s.devMu.Lock()
	defer s.devMu.Unlock()
	if s.devNull != nil {
		err = errors.Join(err, s.devNull.Close())
		s.devNull = nil
	}
	for i := range s.sessions.scripts {
		if sc := &s.sessions.scripts[i]; sc.f != nil {
			sc.f.Close()
			sc.f = nil
		}
	}
	if s.spills != nil {
		err = errors.Join(err, s.spills.Close())
	}
	return err
}
