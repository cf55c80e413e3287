package killtree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Tier names a containment mechanism. The zero value asks for the strongest
// tier that works on this machine.
type Tier string

// The containment tiers, strongest first on Linux.
const (
	// TierCgroup2 is a single-use cgroup v2 leaf killed with cgroup.kill.
	TierCgroup2 Tier = "cgroup2"
	// TierCgroup1 is a single-use cgroup v1 freezer (+pids) leaf killed with
	// freeze, kill every task, thaw.
	TierCgroup1 Tier = "cgroup1"
	// TierPgroup is the baseline: own session and group, group kill, and
	// descendant sweeps through a child subreaper.
	TierPgroup Tier = "pgroup"
	// TierJob is a Windows job object with kill-on-close.
	TierJob Tier = "job"
)

// DefaultPidsMax is the fork limit of one containment when Config.PidsMax is 0.
const DefaultPidsMax = 4096

// EnvContainment is the environment variable that forces a tier when
// Config.Tier is empty ("cgroup2", "cgroup1", "pgroup" or "job").
const EnvContainment = "CORRAL_CONTAINMENT"

// EnvTag is the environment variable Start adds to every command. Its value
// identifies the tree; the baseline sweep and the watchdog use it to find
// descendants that left every other scope (see doc.go).
const EnvTag = "CORRAL_KILLTREE"

// ErrUnavailable is returned (wrapped, with the reason) by New when a forced
// tier does not work on this machine. killtree never falls back silently.
var ErrUnavailable = errors.New("killtree: containment tier unavailable")

// ErrClosed is returned by Start after the Manager was closed.
var ErrClosed = errors.New("killtree: manager closed")

// ErrSoleTree is returned by Start when Config.SoleTree is set and a tree
// is still open.
var ErrSoleTree = errors.New("killtree: a sole-tree manager already has an open tree")

// ErrNotEmpty is returned by Kill when the tree could not be confirmed empty
// within its deadline.
var ErrNotEmpty = errors.New("killtree: tree not confirmed empty")

// killDeadline bounds one Kill call. A kill that cannot confirm an empty tree
// in this time returns ErrNotEmpty with what it did.
const killDeadline = 30 * time.Second

// Config selects and sizes the containment. The zero value is ready to use.
type Config struct {
	// Tier forces a tier. "" means the strongest working tier, unless the
	// environment variable CORRAL_CONTAINMENT names one, which is then forced.
	Tier Tier
	// PidsMax caps the tasks (threads included) of one containment: 0 means
	// DefaultPidsMax, negative means no limit. Honoured by the cgroup tiers and
	// the job tier (active processes); the pgroup tier has no fork limit.
	PidsMax int
	// MemoryMax caps the memory of one containment in bytes; 0 means off.
	// Honoured by the cgroup tiers (v2 memory controller, else a v1 memory
	// leaf), the job tier (job memory limit), and on pgroup as RLIMIT_AS of
	// the shell, which its children inherit: per process, not per tree (see
	// Limits and doc.go, "Limits and usage").
	MemoryMax int64
	// CPUs caps the CPU time of one containment, in CPUs (1.5: one and a
	// half CPUs' worth of time per period); 0 means off. Honoured by the
	// cgroup tiers (v2 cpu.max, else a v1 cpu leaf's CFS quota); not by
	// pgroup or job.
	CPUs float64
	// CgroupParent is the cgroup, relative to this process's own cgroup in
	// each hierarchy, in which containments are nested as
	// <CgroupParent>/<instance>/<command> (see doc.go, "Names on disk"); one
	// beginning with "/" is relative to each hierarchy's root instead.
	// "" means "corral".
	CgroupParent string
	// SoleTree declares that this process runs one tree at a time and
	// starts no child processes of its own other than through this Manager
	// (the CLI). Then every orphan reparented to this process that is not
	// another tree's leader or a watchdog belongs to the open tree,
	// whatever its session, group, cgroup or environment. Start refuses a
	// second open tree with ErrSoleTree. On the pgroup tier such a
	// Manager starts no watchdog (see doc.go, Promises). Linux only;
	// elsewhere no orphan reaches this process and it changes nothing.
	SoleTree bool
	// OwnProcess declares that this process starts no child processes of
	// its own other than through this Manager (corral serve and corral
	// mcp), while it may run many trees at once. Then an orphan reparented
	// to this process that nothing else ties to a tree belongs to the tree
	// that was alive when it was born, if only one was: a daemon that left
	// its session and group and scrubbed its environment is still found,
	// unless another tree's life overlapped its birth: then the first of
	// those trees to end names it (Report.Unattributed) and the last kills
	// it (Report.Strays). A library that starts processes
	// of its own must not set it: such a process, born while a tree lived,
	// would be killed with that tree. Linux only; elsewhere no orphan
	// reaches this process and it changes nothing.
	OwnProcess bool
	// Reaper runs every command under a reaper of its own: this binary
	// re-executed (/proc/self/exe) as a child subreaper that starts the
	// command as its child and stays until every descendant is gone, so
	// that the tree is exactly the reaper's descendants, on every tier and
	// for concurrent trees (see doc.go, "The reaper"). It costs a Go
	// runtime start per command. Linux only: New returns an error wrapping
	// ErrUnavailable elsewhere.
	Reaper bool
	// TierCache names a file where New keeps what tier detection found,
	// for this boot (keyed by /proc/sys/kernel/random/boot_id, the user,
	// this process's cgroups and CgroupParent), so that a later New in
	// another process chooses its tier without detection's self-test
	// children. A cached answer is not trusted blindly: when the first
	// Start of a Manager built on it fails, detection runs again, the
	// file is rewritten, and the Start is retried once on the tier then
	// chosen. "" means no cache (detection runs once per process).
	TierCache string
	// PidsReserve is how many tasks corral keeps for itself below the
	// pids limit it lives under (Envelope): 0 means DefaultPidsReserve.
	PidsReserve int
	// MemoryReserve is how much memory corral keeps for itself below the
	// memory limit it lives under (Envelope): 0 means
	// DefaultMemoryReserve. A server sets its own soft memory limit here.
	MemoryReserve int64

	// instancePids is the pids.max the cgroup tiers write on the instance
	// directory (Envelope.CommandPids: all the commands together stay
	// within the envelope's share); 0: none. Set by the platform.
	instancePids int
}

func (c Config) withDefaults() Config {
	if c.PidsMax == 0 {
		c.PidsMax = DefaultPidsMax
	}
	if c.CgroupParent == "" {
		c.CgroupParent = "corral"
	}
	if c.PidsReserve <= 0 {
		c.PidsReserve = DefaultPidsReserve
	}
	if c.MemoryReserve <= 0 {
		c.MemoryReserve = DefaultMemoryReserve
	}
	return c
}

// forcedTier returns the tier the configuration (or the environment) forces,
// or "".
func (c Config) forcedTier() Tier {
	if c.Tier != "" {
		return c.Tier
	}
	return Tier(os.Getenv(EnvContainment))
}

// Report says what one Kill did.
type Report struct {
	// Tier is the tier that did the kill.
	Tier Tier
	// Processes is how many processes this call killed, as far as it could
	// count them (the members seen just before or during the kill).
	Processes int
	// Escapees is how many of them had left the tier's scope (its cgroup or
	// process group) and were caught by the baseline sweep. A process is
	// counted once over the tree's life, by the first Kill or
	// KillPipeHolders call that met it.
	Escapees int
	// Survivors is how many processes of the tree were still alive when
	// Kill gave up (it then returns an error wrapping ErrNotEmpty): a
	// process in uninterruptible sleep, or frozen in a cgroup Kill may not
	// thaw (see doc.go). 0 when the tree was confirmed empty.
	Survivors int
	// Alive names the survivors, sorted by PID.
	Alive []Process
	// Strays is how many processes this call also killed, with
	// Config.OwnProcess, that no tree claimed and that only this tree or
	// trees that have ended can have left (born while two of them lived);
	// they are not counted in Processes, as they may not be this tree's.
	Strays int
	// Unattributed names the processes, with Config.OwnProcess, that were
	// born while this tree and another tree still open lived, and that no
	// rule ties to either: they are left running, and the last of those
	// trees to end kills them (as its Strays).
	Unattributed []Process
	// Duration is the time from the call to the confirmation that the tree
	// is empty (or to giving up).
	Duration time.Duration
}

// Process names one process of a tree.
type Process struct {
	// Pid is its process ID.
	Pid int
	// Comm is its command name (/proc/<pid>/comm on Linux), or "?".
	Comm string
}

// LimitStatus says how a tier enforces one kind of limit on this machine,
// or why it does not.
type LimitStatus struct {
	// Limit is the kind of limit.
	Limit Limit
	// Enforced says whether the tier enforces it here.
	Enforced bool
	// How names the mechanism, or why there is none.
	How string
}

// TierStatus is one line of Doctor's report.
type TierStatus struct {
	// Tier is the tier described.
	Tier Tier
	// Works says whether the tier can be used on this machine.
	Works bool
	// Reason says why not, or gives details when it works.
	Reason string
	// Chosen marks the tier New would use with the same Config.
	Chosen bool
	// Limits says, for memory, cpus and pids, whether the tier enforces
	// it on this machine and how, or why not.
	Limits []LimitStatus
}

// Doctor reports every tier on this machine for `corral doctor`, in the order
// strongest first, marking the one New(cfg) would choose. It runs detection
// (once per process), including the start-up self-test, never trusting
// Config.TierCache, which it rewrites.
func Doctor(cfg Config) []TierStatus {
	cfg = cfg.withDefaults()
	st := detect(cfg)
	storeTierCache(cfg, st)
	chosen, _ := choose(cfg, st)
	out := make([]TierStatus, len(st))
	copy(out, st)
	for i := range out {
		out[i].Chosen = out[i].Tier == chosen
		out[i].Limits = tierLimits(out[i].Tier)
	}
	return out
}

// choose picks the tier for cfg from the detection result: the forced one if
// it works (an error wrapping ErrUnavailable otherwise), else the first that
// works.
func choose(cfg Config, st []TierStatus) (Tier, error) {
	if f := cfg.forcedTier(); f != "" {
		for _, s := range st {
			if s.Tier != f {
				continue
			}
			if !s.Works {
				return "", fmt.Errorf("killtree: tier %s forced but unusable: %s: %w", f, s.Reason, ErrUnavailable)
			}
			return f, nil
		}
		return "", fmt.Errorf("killtree: unknown tier %q: %w", f, ErrUnavailable)
	}
	for _, s := range st {
		if s.Works {
			return s.Tier, nil
		}
	}
	return "", fmt.Errorf("killtree: no tier works here: %w", ErrUnavailable)
}

// Manager starts commands in containments of one tier. It owns detection
// (cached process-wide), the instance directory, the stale sweep and the
// watchdog. It is safe for concurrent use; Close it when done.
type Manager struct {
	cfg  Config
	env  Envelope  // read by New
	tier Tier      // changed only by recheck, under mu and verify
	plat *platform // changed only by recheck, under mu and verify

	// unverified is set while the tier comes from Config.TierCache and no
	// Start has succeeded on it: Starts then run one at a time under
	// verify, so that a failed one can recheck the tier (startVerifying).
	unverified atomic.Bool
	verify     sync.Mutex

	mu       sync.Mutex
	trees    map[*Tree]struct{} // guarded by mu
	starting int                // Starts in progress; guarded by mu
	closed   bool               // guarded by mu
}

// New detects the tiers (once per CgroupParent per process, or reads them
// from Config.TierCache), chooses one (see Config.Tier), and prepares it: on
// Linux it makes this process a child subreaper, kills and removes
// containments left by dead instances, and starts the watchdog (none for a
// Config.SoleTree Manager on pgroup). A forced tier that does not work
// returns an error wrapping ErrUnavailable. The last two steps run in the
// background: no Start starts a command before the watchdog has started (the
// sweep, of other instances' containments only, may end after; Close waits
// for it). A watchdog that cannot start fails New, or for a
// Config.SoleTree Manager (whose one Start follows at once) its first
// Start.
func New(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	st, cached := detectFor(cfg)
	tier, err := choose(cfg, st)
	if err != nil && cached {
		// A cached answer that names no usable tier is checked at once.
		st, cached = detect(cfg), false
		storeTierCache(cfg, st)
		tier, err = choose(cfg, st)
	}
	if err != nil {
		return nil, err
	}
	plat, err := newPlatform(cfg, tier)
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, env: readEnvelope(cfg), tier: tier, plat: plat, trees: map[*Tree]struct{}{}}
	if m.env.Pids > 0 {
		// Threads held now are counted in PidsUsed (see holdThreads).
		holdThreads()
		m.env = readEnvelope(cfg)
	}
	plat.capInstance(m.env.CommandPids)
	m.unverified.Store(cached)
	return m, nil
}

// Tier returns the tier this Manager uses.
func (m *Manager) Tier() Tier {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tier
}

// Close kills every tree still open (as Tree.Close does), stops the watchdog
// and removes the instance directory. It is idempotent; Start fails with
// ErrClosed afterwards.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	trees := make([]*Tree, 0, len(m.trees))
	for t := range m.trees {
		trees = append(trees, t)
	}
	m.mu.Unlock()
	var errs []error
	for _, t := range trees {
		errs = append(errs, t.Close())
	}
	m.mu.Lock()
	plat := m.plat
	m.mu.Unlock()
	errs = append(errs, plat.close())
	return errors.Join(errs...)
}

var treeSeq atomic.Uint64

// Start creates a fresh single-use containment and starts cmd (not yet
// started) inside it before the child runs its first instruction. It sets the
// SysProcAttr fields it needs (Setsid and, per tier, UseCgroupFD+CgroupFD or
// CreationFlags), keeping any others the caller set (Setpgid is cleared: it
// conflicts with Setsid), and adds EnvTag to cmd.Env (os.Environ() when nil).
// Stdout and Stderr should be *os.File so os/exec starts no copy goroutines.
// On error nothing is left running and the containment is destroyed. The
// caller reaps the leader with cmd.Wait after Kill, and closes the Tree.
func (m *Manager) Start(cmd *exec.Cmd) (*Tree, error) {
	return m.start(cmd, Limits{}.resolve(m.cfg))
}

// start is Start with resolved limits (see StartLimited).
func (m *Manager) start(cmd *exec.Cmd, lim Limits) (*Tree, error) {
	if m.unverified.Load() {
		return m.startVerifying(cmd, lim)
	}
	return m.startOn(cmd, lim)
}

// startVerifying is start on a tier taken from Config.TierCache that no
// Start has confirmed yet, one at a time: a failed Start runs detection
// again (recheck) and, when it then chooses another tier, is retried once
// on that tier with cmd as the caller gave it.
func (m *Manager) startVerifying(cmd *exec.Cmd, lim Limits) (*Tree, error) {
	m.verify.Lock()
	defer m.verify.Unlock()
	if !m.unverified.Load() {
		return m.startOn(cmd, lim)
	}
	given := *cmd
	t, err := m.startOn(cmd, lim)
	if err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrSoleTree) {
		m.unverified.Store(err != nil)
		return t, err
	}
	m.unverified.Store(false)
	if !m.recheck() {
		return nil, err
	}
	*cmd = given
	return m.startOn(cmd, lim)
}

// recheck runs detection after a Start failed on a cached tier, rewrites
// the cache, and moves the Manager to the tier detection now chooses. It
// reports whether that is another tier (a retry may then succeed). Caller
// holds m.verify, and no tree is open (none has started).
func (m *Manager) recheck() bool {
	st := detect(m.cfg)
	storeTierCache(m.cfg, st)
	tier, err := choose(m.cfg, st)
	if err != nil || tier == m.tier {
		return false
	}
	plat, err := newPlatform(m.cfg, tier)
	if err != nil {
		return false
	}
	plat.capInstance(m.env.CommandPids)
	m.mu.Lock()
	old := m.plat
	m.tier, m.plat = tier, plat
	m.mu.Unlock()
	_ = old.close() // nothing of it is in use: it never started a tree
	return true
}

// startOn starts cmd on the Manager's current tier.
func (m *Manager) startOn(cmd *exec.Cmd, lim Limits) (t *Tree, retErr error) {
	if err := m.reserve(); err != nil {
		return nil, err
	}
	defer m.unreserve()
	memTree, _, pids := m.plat.enforces()
	memTree = memTree && m.tier != TierPgroup // pgroup's is per process
	lim, b := m.env.bound(lim, pids, memTree)
	t = &Tree{m: m, cmd: cmd, tier: m.tier, lim: lim, bound: b, exited: make(chan struct{})}
	t.envEvents = m.env.refusals()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	undo, err := t.wrapReaper(cmd)
	if err != nil {
		return nil, err
	}
	env := cmd.Env
	m.plat.opened(t)
	c, err := m.plat.start(cmd, lim, func(id string) {
		t.id, t.tag = id, m.plat.instance+"."+id
		cmd.Env = append(env, EnvTag+"="+t.tag)
	})
	undo(err == nil)
	if err != nil {
		m.plat.ended(t)
		return nil, err
	}
	t.c = c
	t.pid = cmd.Process.Pid
	if err := t.afterStart(); err != nil {
		_, kerr := t.Kill()
		_ = cmd.Wait() // reap the leader we started; its status is of no interest
		return nil, errors.Join(err, kerr, t.Close())
	}
	t.watchOOM()
	m.mu.Lock()
	m.trees[t] = struct{}{}
	m.mu.Unlock()
	return t, nil
}

// reserve counts a Start in progress, or refuses it: the Manager is closed,
// or it is a sole-tree Manager with a tree open or starting.
func (m *Manager) reserve() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.cfg.SoleTree && (len(m.trees) > 0 || m.starting > 0) {
		return ErrSoleTree
	}
	m.starting++
	return nil
}

func (m *Manager) unreserve() {
	m.mu.Lock()
	m.starting--
	m.mu.Unlock()
}

// newID returns a fresh containment ID, unique in this process.
func newID() string { return strconv.FormatUint(treeSeq.Add(1), 10) }

// startFresh creates the containment of a new ID with newC, names the tree
// after it (name sets the tree's ID and the command's tag) and starts cmd
// inside it. On error the containment is destroyed.
func startFresh(newC func(id string) (containment, error), cmd *exec.Cmd, name func(id string)) (containment, error) {
	id := newID()
	c, err := newC(id)
	if err != nil {
		return nil, err
	}
	return startIn(c, id, cmd, name)
}

// startIn names the tree after the containment's id and starts cmd in c. On
// error c is destroyed.
func startIn(c containment, id string, cmd *exec.Cmd, name func(id string)) (containment, error) {
	name(id)
	if err := c.start(cmd); err != nil {
		return nil, errors.Join(err, c.destroy())
	}
	return c, nil
}

func (m *Manager) forget(t *Tree) {
	m.plat.ended(t)
	m.mu.Lock()
	delete(m.trees, t)
	m.mu.Unlock()
}

// containment is one tier's single-use scope for one command. Per-OS files
// implement it; the baseline (group kill, sweeps, reaping) lives on Tree.
type containment interface {
	// start prepares cmd.SysProcAttr and starts cmd inside the containment.
	start(cmd *exec.Cmd) error
	// procs lists the live processes the containment holds (nil, nil when
	// the tier has no membership list of its own, as for pgroup).
	procs() ([]int, error)
	// kill kills every process in the containment and returns the ones it
	// saw; it does not wait beyond what the mechanism needs, nor past
	// deadline.
	kill(deadline time.Time) ([]int, error)
	// waitEmpty waits until the containment holds no live process, or
	// returns ctx.Err(); tiers without a list return nil at once.
	waitEmpty(ctx context.Context) error
	// pause freezes (true) or thaws (false) the containment where the tier
	// can (cgroup.freeze, the v1 freezer); a no-op elsewhere. It does not
	// wait for the freeze to complete.
	pause(frozen bool) error
	// destroy removes the containment; idempotent.
	destroy() error
	// dirs lists the containment's directories (cgroup leaves).
	dirs() []string
}
