package killtree

import (
	"errors"
	"fmt"
	"github.com/corral-sh/corral/killtree/internal/procfs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

var (
	instanceOnce sync.Once
	instanceName string

	subreaperOnce sync.Once
	subreaperErr  error
)

// instance names this process's containments: "<pid>-<start time>", unique
// across PID reuse. The stale sweep kills the containments of instances whose
// owner is no longer alive.
func instance() string {
	instanceOnce.Do(func() {
		instanceName = strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(procStart(os.Getpid()), 10)
	})
	return instanceName
}

// becomeSubreaper makes this process a child subreaper (Linux 3.4), once:
// orphaned descendants (setsid, double fork) are reparented to us instead of
// init, so they stay visible to the sweep and their zombies are ours to reap.
func becomeSubreaper() error {
	subreaperOnce.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			subreaperErr = fmt.Errorf("killtree: PR_SET_CHILD_SUBREAPER: %w", err)
		}
	})
	return subreaperErr
}

// noWatchdog is set by tests that simulate a supervisor without a watchdog,
// to show what the stale sweep alone does.
var noWatchdog bool

// platform is the Linux side of a Manager.
type platform struct {
	cfg      Config
	tier     Tier
	instance string
	mnt      *mounts
	wd       *watchdog     // set before guarded is closed; nil without one
	guarded  chan struct{} // closed once the watchdog started, or failed to (awaitGuard)
	setup    chan struct{} // closed when the background setup is done (awaitSetup)
	setupErr error         // the watchdog's start failure; read after guarded is closed
	prep     *preparer     // the cgroup tiers' next containment; nil on pgroup
	own      *procfs.File  // this process's children list; nil without CONFIG_PROC_CHILDREN
	homes    *homes        // the cgroup tiers' thread-trick homes; nil on pgroup
	births   births        // when each tree lived (Config.OwnProcess)

	instancePids atomic.Int64 // Config.instancePids for the containments made from now on (capInstance)
	unconfirmed  atomic.Int32 // containments destroyed that Kill had not confirmed empty

	lastStale atomic.Int64   // UnixNano of the last stale sweep
	staleMu   sync.Mutex     // guards staleDone and the Add of staleWG
	staleDone bool           // close has begun: no more background sweeps
	staleWG   sync.WaitGroup // the background stale sweep, waited by close
}

// staleEvery is how often at most a running Manager's Start looks for the
// containments of dead instances (see sweepStaleSoon); a variable for the
// tests.
var staleEvery = 5 * time.Second

func newPlatform(cfg Config, tier Tier) (*platform, error) {
	if err := becomeSubreaper(); err != nil {
		return nil, err
	}
	// The mount table first: its check of this process's cgroup
	// (busyCgroup2) must not meet the watchdog before it is known as ours.
	p := &platform{cfg: cfg, tier: tier, instance: instance(), mnt: findMounts(),
		guarded: make(chan struct{}), setup: make(chan struct{})}
	// One watchdog per Manager; a sole-tree Manager (the CLI) on pgroup
	// has no containment for it to guard (doc.go, Promises).
	guard := !noWatchdog && !(cfg.SoleTree && tier == TierPgroup)
	go p.setUp(guard)
	// setUp runs now, on this thread, and this goroutine goes on on
	// another: left to the scheduler, setUp would wait until this one
	// blocks, and New and its caller's setup do not before the first
	// Start.
	runtime.Gosched()
	p.own = openOwnChildren()
	p.lastStale.Store(time.Now().UnixNano())
	p.births.since = bootTicks()
	if tier == TierCgroup2 || tier == TierCgroup1 {
		p.homes = &homes{}
		for _, root := range p.mnt.trickRoots() {
			p.homes.under = append(p.homes.under, p.mnt.cgroupPath(root, cfg.CgroupParent))
		}
		p.prep = newPreparer(p.newContainment, cfg.SoleTree)
	}
	if !cfg.SoleTree {
		// A server learns now that it cannot guard its commands; the
		// CLI, whose one command follows at once, at its Start.
		if err := p.awaitSetup(); err != nil {
			_ = p.close()
			return nil, err
		}
	}
	return p, nil
}

// setUp is the part of New that runs beside the rest of it and the
// caller's own setup: the watchdog's start when guard is set (a vfork and an
// exec) and the stale sweep (a walk of the instances' directories in every
// hierarchy). It closes guarded when the watchdog's start returned, and
// setup when both are done. No command starts before the watchdog
// (awaitGuard): none runs unguarded. The sweep may end after the first
// command started: it ends other instances' containments, never this
// one's, and Close waits for it.
func (p *platform) setUp(guard bool) {
	defer close(p.setup)
	var sweep sync.WaitGroup
	sweep.Go(func() { sweepStale(p.mnt, p.cfg.CgroupParent) })
	if guard {
		p.wd, p.setupErr = startWatchdog(p.instance, p.mnt.instanceDirs(p.cfg.CgroupParent, p.instance))
	}
	close(p.guarded)
	sweep.Wait()
}

// awaitGuard waits for the watchdog's start and returns its failure.
func (p *platform) awaitGuard() error {
	<-p.guarded
	return p.setupErr
}

// awaitSetup waits for all of setUp and returns the watchdog's start
// failure.
func (p *platform) awaitSetup() error {
	<-p.setup
	return p.setupErr
}

func (p *platform) newContainment(id string) (containment, error) {
	return p.newLimited(id, Limits{}.resolve(p.cfg))
}

// capInstance makes the containments from now on write n (0: none) as
// the pids.max of the instance directory: the envelope's share for all of
// this process's commands together, as each one's own is for one.
func (p *platform) capInstance(n int) { p.instancePids.Store(int64(n)) }

// newLimited makes a containment with the limits lim (resolved).
func (p *platform) newLimited(id string, lim Limits) (containment, error) {
	cfg := lim.config(p.cfg)
	cfg.instancePids = int(p.instancePids.Load())
	switch p.tier {
	case TierCgroup2:
		p.homes.refresh(p.mnt.trickRoots())
		return newCgroup2(p.mnt, cfg, p.instance, id, p.homes)
	case TierCgroup1:
		p.homes.refresh(p.mnt.trickRoots())
		return newCgroup1(p.mnt, cfg, p.instance, id, p.homes)
	case TierPgroup:
		return pgroupC{memory: lim.MemoryBytes}, nil
	}
	return nil, fmt.Errorf("killtree: tier %s: %w", p.tier, ErrUnavailable)
}

// start starts cmd in a fresh containment with the limits lim (resolved):
// the one prepared in the background on the cgroup tiers if it is ready
// and can take lim (retune), else one made now.
func (p *platform) start(cmd *exec.Cmd, lim Limits, name func(id string)) (containment, error) {
	if err := p.awaitGuard(); err != nil {
		return nil, err
	}
	p.sweepStaleSoon()
	newC := func(id string) (containment, error) { return p.newLimited(id, lim) }
	if p.prep == nil {
		return startFresh(newC, cmd, name)
	}
	defer p.prep.restock()
	if sp := p.prep.take(); sp != nil {
		if r, ok := sp.c.(interface{ retune(Limits) bool }); !ok || r.retune(lim) {
			return startIn(sp.c, sp.id, cmd, name)
		}
		_ = p.prep.remove(sp.c) // its removal errors reach Manager.Close
	}
	return startFresh(newC, cmd, name)
}

// opened and ended bracket a tree's life for Config.OwnProcess (births).
func (p *platform) opened(t *Tree) { p.births.opened(t) }
func (p *platform) ended(t *Tree) {
	t.mu.Lock()
	left := t.st.leftUnattributed
	t.mu.Unlock()
	p.births.ended(t, left)
}

// tierLimits says how tier enforces each limit here (Doctor).
func tierLimits(tier Tier) []LimitStatus { return limitsDoc(tier, findMounts()) }

// sweepStaleSoon starts the stale sweep in the background when the last one
// is staleEvery old: a server whose commands all end by themselves still
// ends the containments of a sibling instance that died with its watchdog
// (a nested corral killed by an outer cgroup kill, an OOM kill of both)
// within that time, not only at the next New. What it kills that was
// reparented to this process is reaped. The cost on Start is a clock read.
func (p *platform) sweepStaleSoon() {
	now := time.Now().UnixNano()
	last := p.lastStale.Load()
	if now-last < int64(staleEvery) || !p.lastStale.CompareAndSwap(last, now) {
		return
	}
	p.staleMu.Lock()
	defer p.staleMu.Unlock()
	if p.staleDone {
		return
	}
	p.staleWG.Add(1)
	go func() {
		defer p.staleWG.Done()
		reapStale(sweepStale(p.mnt, p.cfg.CgroupParent))
	}()
}

// destroy removes a closed tree's containment: in the background when a
// preparer runs, else now. A tree Kill could not confirm empty goes to the
// background too: its removal kills and waits (rmTree), and the Result of
// its command must not wait for that.
func (p *platform) destroy(c containment, empty bool) error {
	if !empty {
		p.unconfirmed.Add(1)
	}
	if p.prep != nil {
		return p.prep.remove(c)
	}
	return c.destroy()
}

// close stops the preparer and the watchdog, and removes this instance's
// directories when no other Manager of this process still uses them.
func (p *platform) close() error {
	p.staleMu.Lock()
	p.staleDone = true
	p.staleMu.Unlock()
	p.staleWG.Wait()
	_ = p.awaitSetup() // a failed start left no watchdog to stop
	// The watchdog's teardown (a Go process's threads and memory) runs
	// while the rest is done; it is reaped last. It guards the removals
	// of containments Kill could not confirm empty (rmTree kills and
	// waits) until they are done; when every one was confirmed empty, what
	// is left to remove holds no process, and it is killed first.
	var err error
	guardRemovals := p.unconfirmed.Load() > 0
	if !guardRemovals {
		err = p.wd.kill()
	}
	if p.prep != nil {
		err = errors.Join(err, p.prep.close())
	}
	if guardRemovals {
		err = errors.Join(err, p.wd.kill())
	}
	err = errors.Join(err, p.own.Close(), p.homes.close())
	for _, d := range p.mnt.instanceDirs(p.cfg.CgroupParent, p.instance) {
		if rerr := unix.Rmdir(d); rerr != nil && !errors.Is(rerr, unix.ENOENT) && !errors.Is(rerr, unix.EBUSY) && !errors.Is(rerr, unix.ENOTEMPTY) {
			err = errors.Join(err, fmt.Errorf("killtree: rmdir %s: %w", d, rerr))
		}
	}
	p.wd.reap()
	return err
}
