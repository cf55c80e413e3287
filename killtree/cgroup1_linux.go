package killtree

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// cgroup1 is a single-use cgroup v1 freezer leaf (plus a pids leaf carrying
// pids.max), joined through the thread trick (startInV1). The kill loop is
// runc's fallback: FROZEN, SIGKILL every task, THAWED, until empty. v1-frozen
// tasks do not act on SIGKILL until thawed (kernel
// Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst; docs/killtree.md
// §2.6, E3).
type cgroup1 struct {
	freezer string
	suffix  string
	leaves  []v1leaf
	homes   *homes     // the thread trick's home cgroups; nil: read them at each start
	lims    cgLimits   // memory and CPU limits, accounting
	oom     readCloser // the OOM notification of the memory leaf, armed by start; nil

	mu        sync.Mutex
	destroyed bool // guarded by mu
}

// newCgroup1 makes the leaves, applies the limit and opens the files a
// start and the scans use, so that none of that happens on the start path
// when the preparer made it.
func newCgroup1(mnt *mounts, cfg Config, inst, id string, h *homes) (c *cgroup1, retErr error) {
	if mnt.v1["freezer"] == "" {
		return nil, fmt.Errorf("killtree: no cgroup v1 freezer hierarchy: %w", ErrUnavailable)
	}
	rel := filepath.Join(cfg.CgroupParent, inst, id)
	fl, err := mkV1Leaf("freezer", mnt.v1["freezer"], rel)
	if err != nil {
		return nil, err
	}
	c = &cgroup1{freezer: fl.dir, suffix: "/" + strings.TrimPrefix(rel, "/"), leaves: []v1leaf{fl}, homes: h}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, c.destroy())
		}
	}()
	// The pids leaf is made even without a limit: kill uses it as a fork
	// barrier.
	if mnt.v1["pids"] != "" {
		pl, err := mkV1Leaf("pids", mnt.v1["pids"], rel)
		if err != nil {
			return nil, err
		}
		c.leaves = append(c.leaves, pl)
		c.lims.pids = pl.dir
		limit := "max"
		if cfg.PidsMax > 0 {
			limit = strconv.Itoa(cfg.PidsMax)
		}
		if err := writeFile(filepath.Join(pl.dir, "pids.max"), limit); err != nil {
			return nil, err
		}
		capInstanceDir(filepath.Dir(pl.dir), cfg.instancePids)
	}
	leaves, err := c.lims.makeLimits(mnt, cfg, inst, rel)
	c.leaves = append(c.leaves, leaves...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// writePids writes the pids leaf's limit (0: none).
func (c *cgroup1) writePids(n int) error {
	if c.lims.pids == "" {
		return nil
	}
	v := "max"
	if n > 0 {
		v = strconv.Itoa(n)
	}
	return writeFile(filepath.Join(c.lims.pids, "pids.max"), v)
}

func (c *cgroup1) retune(want Limits) bool { return c.lims.retune(want, c.writePids) }
func (c *cgroup1) reached() Limit          { return c.lims.reached() }
func (c *cgroup1) usage() Usage            { return c.lims.usage() }
func (c *cgroup1) oomGroup() bool          { return c.lims.v2mem }
func (c *cgroup1) oomEvents() readCloser   { return c.oom }

func (c *cgroup1) start(cmd *exec.Cmd) error {
	setSession(cmd)
	c.oom = c.lims.oomEventFD()
	return startInV1(c.leaves, c.homes, cmd.Start)
}

func (c *cgroup1) leafSuffix() string { return c.suffix }

// procs opens cgroup.procs for every read. Unlike v2's, a v1 cgroup.procs
// kept open would not do: its reads come from a pidlist cached for a second
// after the last read (kernel/cgroup/cgroup-v1.c, cgroup_pidlist_start and
// CGROUP_PIDLIST_DESTROY_DELAY), so the kill loop, re-reading it every few
// milliseconds, would never see the dead leave.
// The list covers the cgroups a root command nested in the leaf.
func (c *cgroup1) procs() ([]int, error) {
	return readPidsTree(c.freezer)
}

// kill freezes, kills every listed process, thaws, and repeats until the
// freezer cgroup lists no process, or until deadline. It returns every PID it
// signalled. Freezing the leaf freezes the cgroups nested in it; thawing it
// does not thaw those that froze themselves, so they are thawed one by one.
func (c *cgroup1) kill(deadline time.Time) ([]int, error) {
	if pids, err := c.procs(); err == nil && len(pids) == 0 {
		return nil, nil // empty: only a member could add one, by forking
	}
	c.lims.notePidsEvents()
	c.blockForks()
	c.lims.liftCPU()
	seen := map[int]bool{}
	var all []int
	var failed firstErr
	state := filepath.Join(c.freezer, "freezer.state")
	for {
		if pids, err := c.procs(); err == nil && len(pids) == 0 {
			return all, nil // empty: only a member could add one, by forking
		}
		if err := writeFile(state, "FROZEN"); err != nil {
			return all, err
		}
		c.waitFrozen(state, deadline)
		pids, err := c.procs()
		if err != nil {
			return all, err
		}
		for _, p := range pids {
			_, err := sendSignal(p, unix.SIGKILL)
			failed.keep(err)
			if !seen[p] {
				seen[p] = true
				all = append(all, p)
			}
		}
		if err := writeFile(state, "THAWED"); err != nil {
			return all, err
		}
		thawNested(c.freezer)
		if len(pids) == 0 {
			return all, nil
		}
		if time.Now().After(deadline) {
			return all, failed.notEmpty("killtree: freezer %s", c.freezer)
		}
		_ = pollUntil(context.Background(), func() bool { // killed tasks leave within ms once thawed
			p, _ := c.procs()
			return len(p) == 0 || time.Now().After(deadline)
		})
	}
}

// blockForks sets the pids leaf's pids.max to 0. A limit below pids.current
// is allowed ("it is possible to have pids.current > pids.max",
// Documentation/admin-guide/cgroup-v1/pids.rst), and from then on every fork
// in the leaf fails with EAGAIN. The v1 freezer alone can stay FREEZING under
// a fork bomb and let the kill loop be outrun; with the barrier each round
// only shrinks the tree.
func (c *cgroup1) blockForks() {
	for _, l := range c.leaves {
		if l.ctrl == "pids" {
			_ = writeFile(filepath.Join(l.dir, "pids.max"), "0") // best effort: the loop still converges without it, slower
		}
	}
}

// waitFrozen waits (up to 1 s, and not past deadline) until the state
// leaves FREEZING; a task stuck in the kernel can keep it FREEZING, in which
// case the loop goes on anyway and the next round catches what it missed.
func (c *cgroup1) waitFrozen(state string, deadline time.Time) {
	ctx, cancel := contextUntil(earliest(time.Now().Add(time.Second), deadline))
	defer cancel()
	_ = pollUntil(ctx, func() bool { return !strings.Contains(readFileOr(state), "FREEZING") })
}

func (c *cgroup1) pause(frozen bool) error {
	return writeFile(filepath.Join(c.freezer, "freezer.state"), map[bool]string{true: "FROZEN", false: "THAWED"}[frozen])
}

func (c *cgroup1) waitEmpty(ctx context.Context) error {
	return pollUntil(ctx, func() bool {
		p, err := c.procs()
		return err == nil && len(p) == 0
	})
}

func (c *cgroup1) destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	c.destroyed = true
	if c.oom != nil {
		_ = c.oom.Close() // the Tree closed it already, unless the start failed
	}
	var errs []error
	for _, l := range c.leaves {
		errs = append(errs, rmTree(l.dir))
	}
	return errors.Join(errs...)
}

func (c *cgroup1) dirs() []string {
	var out []string
	for _, l := range c.leaves {
		out = append(out, l.dir)
	}
	return out
}
