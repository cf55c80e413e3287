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

// cgroup2 is a single-use cgroup v2 leaf <own>/<parent>/<instance>/<id> (see
// place). The
// child is born in it through clone3(CLONE_INTO_CGROUP) (SysProcAttr
// UseCgroupFD, Go 1.20, Linux 5.7); it is killed with cgroup.kill (Linux
// 5.14). It is never reused: on 6.18 a clone3 into a cgroup that was once
// killed yields a child killed at birth (kernel/cgroup/cgroup.c
// cgroup_post_fork compares a kill_seq snapshot taken from the parent's
// cgroup; docs/killtree.md §2.5, E6b).
type cgroup2 struct {
	dir    string
	suffix string     // "/<parent>/<instance>/<id>", the end of the leaf's path in /proc/<pid>/cgroup
	used   bool       // a command was started in it
	v1     []v1leaf   // hybrid hosts: the v1 pids leaf carrying pids.max
	homes  *homes     // the thread trick's home cgroups; nil: read them at each start
	lims   cgLimits   // memory and CPU limits, accounting
	oom    readCloser // the OOM notification of a v1 memory leaf, armed by start; nil

	mu        sync.Mutex
	destroyed bool // guarded by mu
}

// newCgroup2 makes the leaf and applies the limits. It keeps no file of the
// leaf open: a prepared containment holding descriptors would make the
// process's descriptor count depend on the preparer's timing, and the opens
// it would save are a small part of a start (BenchmarkSpawnTrue).
func newCgroup2(mnt *mounts, cfg Config, inst, id string, h *homes) (c *cgroup2, retErr error) {
	if mnt.v2 == "" {
		return nil, fmt.Errorf("killtree: no cgroup2 mount: %w", ErrUnavailable)
	}
	rel := filepath.Join(cfg.CgroupParent, inst, id)
	dir, err := mkLeaf(mnt.place(mnt.v2, rel))
	if err != nil {
		return nil, err
	}
	c = &cgroup2{dir: dir, suffix: "/" + strings.TrimPrefix(rel, "/"), homes: h}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, c.destroy())
		}
	}()
	if err := c.limit(mnt, cfg, inst, rel); err != nil {
		return nil, err
	}
	return c, nil
}

// limit applies pids.max (v2 controller, else the v1 pids hierarchy), then
// the memory and CPU limits (cgLimits.makeLimits).
func (c *cgroup2) limit(mnt *mounts, cfg Config, inst, rel string) error {
	c.lims.v2 = c.dir
	if cfg.PidsMax > 0 && mnt.v2ctrl["pids"] {
		if err := enableControllers(mnt.v2, cfg.CgroupParent, inst, []string{"pids"}); err != nil {
			return err
		}
	}
	if cfg.PidsMax > 0 {
		switch {
		case mnt.v2ctrl["pids"]:
			c.lims.v2pids = true
			if err := writeFile(filepath.Join(c.dir, "pids.max"), strconv.Itoa(cfg.PidsMax)); err != nil {
				return err
			}
			capInstanceDir(filepath.Dir(c.dir), cfg.instancePids)
		case mnt.v1["pids"] != "":
			l, err := mkV1Leaf("pids", mnt.v1["pids"], rel)
			if err != nil {
				return err
			}
			c.v1 = append(c.v1, l)
			c.lims.pids = l.dir
			if err := writeFile(filepath.Join(l.dir, "pids.max"), strconv.Itoa(cfg.PidsMax)); err != nil {
				return err
			}
			capInstanceDir(filepath.Dir(l.dir), cfg.instancePids)
		}
	}
	leaves, err := c.lims.makeLimits(mnt, cfg, inst, rel)
	c.v1 = append(c.v1, leaves...)
	return err
}

// writePids writes the pids limit (0: none) where limit put it.
func (c *cgroup2) writePids(n int) error {
	v := "max"
	if n > 0 {
		v = strconv.Itoa(n)
	}
	switch {
	case c.lims.v2pids:
		return writeFile(filepath.Join(c.dir, "pids.max"), v)
	case c.lims.pids != "":
		return writeFile(filepath.Join(c.lims.pids, "pids.max"), v)
	}
	return nil
}

func (c *cgroup2) retune(want Limits) bool { return c.lims.retune(want, c.writePids) }
func (c *cgroup2) reached() Limit          { return c.lims.reached() }
func (c *cgroup2) usage() Usage            { return c.lims.usage() }
func (c *cgroup2) oomGroup() bool          { return c.lims.v2mem }
func (c *cgroup2) oomEvents() readCloser   { return c.oom }

// enableControllers writes +ctrl into cgroup.subtree_control from the
// cgroup the leaves are placed under (this process's own, or the root of
// the v2 hierarchy mounted at root; see place) down to the instance
// directory, so the leaves get the controller's files. None of these
// directories may hold a process (the no-internal-process rule): only
// leaves get commands, and when this process lives in the first one (its
// own cgroup, not the root) and the kernel refuses with EBUSY, it moves
// itself into a leaf of its own (leaveHome) and tries again. The
// controllers must be delegated to that cgroup already (its
// cgroup.controllers, which findMounts read): the ancestors above it are
// not written.
func enableControllers(root, parent, inst string, ctrls []string) error {
	mnt := findMounts()
	first := mnt.place(root, "")
	if strings.HasPrefix(parent, "/") {
		first = root
	}
	dirs := []string{first}
	cur := first
	for _, el := range append(strings.Split(filepath.ToSlash(parent), "/"), inst) {
		if el == "" {
			continue
		}
		cur = filepath.Join(cur, el)
		dirs = append(dirs, cur)
	}
	for i, d := range dirs { // every ancestor of the leaves
		for _, ctl := range ctrls {
			err := writeFile(filepath.Join(d, "cgroup.subtree_control"), "+"+ctl)
			if err != nil && i == 0 && isBusy(err) && mnt.nested(root, parent) {
				if _, lerr := leaveHome(d, dirs[len(dirs)-1]); lerr != nil {
					return errors.Join(err, lerr)
				}
				err = writeFile(filepath.Join(d, "cgroup.subtree_control"), "+"+ctl)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *cgroup2) start(cmd *exec.Cmd) error {
	if c.used {
		return fmt.Errorf("killtree: cgroup %s already used", c.dir)
	}
	c.used = true
	fd, err := unix.Open(c.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("killtree: open %s: %w", c.dir, err)
	}
	defer unix.Close(fd)
	attr := setSession(cmd)
	attr.UseCgroupFD = true
	attr.CgroupFD = fd
	c.oom = c.lims.oomEventFD()
	return startInV1(c.v1, c.homes, cmd.Start)
}

func (c *cgroup2) leafSuffix() string { return c.suffix }

// procs lists the leaf's processes and those of the cgroups a root command
// nested in it.
func (c *cgroup2) procs() ([]int, error) {
	return readPidsTree(c.dir)
}

// kill lists the cgroup's processes (the count for the report, and the PIDs
// whose zombies are ours to reap) and writes cgroup.kill: atomic against
// concurrent forks and migrations (cgroup-v2.rst). Listing after the blow
// would not delay it, but dying tasks leave the list within milliseconds and
// the count would be a fraction of the truth. cgroup.kill covers the
// cgroups nested in the leaf; those that froze themselves are thawed after
// it. A frozen v2 task dies of SIGKILL anyway (cgroup-v2.rst,
// cgroup.freeze), so this only keeps the rule of every tier: what the tree
// froze is thawed on its way down.
func (c *cgroup2) kill(time.Time) ([]int, error) {
	pids, err := c.procs()
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		// Nothing left to fork into it; an escapee that still could is
		// the sweep's.
		return nil, nil
	}
	if err := writeFile(filepath.Join(c.dir, "cgroup.kill"), "1"); err != nil {
		return pids, err
	}
	c.lims.liftCPU()
	thawNested(c.dir)
	return pids, nil
}

func (c *cgroup2) pause(frozen bool) error {
	return writeFile(filepath.Join(c.dir, "cgroup.freeze"), map[bool]string{true: "1", false: "0"}[frozen])
}

func (c *cgroup2) waitEmpty(ctx context.Context) error {
	return waitPopulated0(ctx, filepath.Join(c.dir, "cgroup.events"))
}

func (c *cgroup2) destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	c.destroyed = true
	if c.oom != nil {
		_ = c.oom.Close() // the Tree closed it already, unless the start failed
	}
	errs := []error{rmTree(c.dir)}
	for _, l := range c.v1 {
		errs = append(errs, rmTree(l.dir))
	}
	return errors.Join(errs...)
}

func (c *cgroup2) dirs() []string {
	out := []string{c.dir}
	for _, l := range c.v1 {
		out = append(out, l.dir)
	}
	return out
}
