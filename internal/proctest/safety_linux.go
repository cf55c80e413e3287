package proctest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Safety is a set of cgroups, one per available hierarchy, that caps the number of processes
// an adversarial test can make (pids.max) and lets the test's cleanup kill everything it
// started, whatever the code under test did. Create it with Safe. Its methods are safe for
// concurrent use; the cgroups are killed and removed by t.Cleanup.
type Safety struct {
	t    testing.TB
	name string
	// pidsDir is the cgroup whose pids.max and pids.current apply: the v1 pids cgroup, or the
	// v2 cgroup where v2 has the pids controller.
	pidsDir string
	// v1 lists the v1 cgroups (pids, freezer, memory, cpu, cpuacct) that Start moves its
	// thread into. The last three carry no limit (but see LimitMemory): they are there so that
	// the cgroups code under test nests in them are removed by the cleanup.
	v1 []v1Cgroup
	// freezer is the v1 freezer cgroup, or "".
	freezer string
	// v2 is the cgroup2 cgroup, or "".
	v2 string
}

// v1Cgroup is one safety cgroup in a v1 hierarchy.
type v1Cgroup struct {
	controller string // "pids" or "freezer"
	mount      string // the hierarchy's mount point
	dir        string // mount/name
}

// Safe creates the safety cgroups corral-safety-<random> at the root of the v1 pids and
// freezer hierarchies and of the cgroup2 hierarchy, whichever are mounted and writable, sets
// pids.max to pidsMax, and registers a cleanup with t that kills every process inside and
// removes the cgroups, children first (so cgroups that code under test nests inside are
// removed too). A v1 pids cgroup holds the limit; without one, a v2 cgroup with the pids
// controller does. If neither can be made, Safe skips the test with the reason. The first
// Safe of a test process sweeps the safety cgroups of test processes that are gone (sweepStale).
func Safe(t testing.TB, pidsMax int) *Safety {
	t.Helper()
	sweepStale(t)
	s := &Safety{t: t, name: safetyName()}
	if err := s.create(pidsMax); err != nil {
		s.remove()
		t.Skipf("proctest: safety cgroup: %v", err)
	}
	t.Cleanup(s.cleanup)
	return s
}

// create makes the cgroups. It returns an error wrapping ErrNoCgroups if none can cap pids.
func (s *Safety) create(pidsMax int) error {
	mounts, err := readMounts()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	var reasons []error
	for _, c := range []string{"pids", "freezer", "memory", "cpu", "cpuacct"} {
		mnt, ok := mounts.v1[c]
		if !ok || slices.ContainsFunc(s.v1, func(v v1Cgroup) bool { return v.mount == mnt }) {
			continue // absent, or co-mounted with one made already (cpu,cpuacct)
		}
		dir := filepath.Join(mnt, s.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			reasons = append(reasons, err)
			continue
		}
		s.v1 = append(s.v1, v1Cgroup{controller: c, mount: mnt, dir: dir})
		switch c {
		case "pids":
			s.pidsDir = dir
		case "freezer":
			s.freezer = dir
		}
	}
	if mounts.v2 != "" {
		dir := filepath.Join(mounts.v2, s.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			reasons = append(reasons, err)
		} else {
			s.v2 = dir
			if s.pidsDir == "" && s.enableV2Pids(mounts.v2) {
				s.pidsDir = dir
			}
		}
	}
	if s.pidsDir == "" {
		return fmt.Errorf("%w: %w", ErrNoCgroups, errors.Join(reasons...))
	}
	if err := writeFile(filepath.Join(s.pidsDir, "pids.max"), strconv.Itoa(pidsMax)); err != nil {
		return fmt.Errorf("%w: pids.max: %w", ErrNoCgroups, err)
	}
	return nil
}

// enableV2Pids enables the pids controller for the children of the cgroup2 root and reports
// whether the safety cgroup then has pids.max.
func (s *Safety) enableV2Pids(root string) bool {
	ctl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil || !slices.Contains(strings.Fields(string(ctl)), "pids") {
		return false
	}
	_ = writeFile(filepath.Join(root, "cgroup.subtree_control"), "+pids") // Checked below.
	_, err = os.Stat(filepath.Join(s.v2, "pids.max"))
	return err == nil
}

// LimitMemory caps the memory of everything in the safety cgroups to bytes (the v1 memory
// cgroup's memory.limit_in_bytes and memory.memsw.limit_in_bytes, or the v2 memory.max where
// the v2 cgroup has the memory controller), so that a memory test whose own limit fails
// cannot take the machine. It skips the test when neither can be set.
func (s *Safety) LimitMemory(bytes int64) {
	s.t.Helper()
	v := strconv.FormatInt(bytes, 10)
	if dir := s.Dir("memory"); dir != "" {
		if err := writeFile(filepath.Join(dir, "memory.limit_in_bytes"), v); err != nil {
			s.t.Skipf("proctest: safety memory limit: %v", err)
		}
		_ = writeFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), v) // absent without swap accounting
		return
	}
	if s.v2 != "" {
		if err := writeFile(filepath.Join(s.v2, "memory.max"), v); err == nil {
			return
		}
	}
	s.t.Skip("proctest: no memory cgroup for the safety limit")
}

// Name returns the cgroups' name relative to the root of each hierarchy, for example
// "corral-safety-0a1b2c3d". Pass it as a parent cgroup to code that makes its own cgroups so
// that they nest inside the safety cgroups.
func (s *Safety) Name() string { return s.name }

// Dir returns the safety cgroup's directory in the v1 hierarchy of controller ("freezer",
// "pids"), or in the cgroup2 hierarchy for "", or "" when there is none. Tests make the
// cgroups an adversarial command would use below it, so that the cleanup removes them.
func (s *Safety) Dir(controller string) string {
	if controller == "" {
		return s.v2
	}
	for _, c := range s.v1 {
		if c.controller == controller {
			return c.dir
		}
	}
	return ""
}

// Current returns the number of tasks (threads, not processes) charged to the safety
// cgroup's pids controller (pids.current).
func (s *Safety) Current() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.pidsDir, "pids.current"))
	if err != nil {
		return 0, fmt.Errorf("proctest: pids.current: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("proctest: pids.current: %w", err)
	}
	return n, nil
}

// Start starts cmd inside the safety cgroups before the child runs any code of its own. The
// v2 cgroup is given to clone3 through SysProcAttr.UseCgroupFD (CLONE_INTO_CGROUP; cmd's
// SysProcAttr is created if nil, and other fields are kept). The v1 cgroups cannot be given
// to clone, so Start starts cmd inside Run.
func (s *Safety) Start(cmd *exec.Cmd) error {
	if s.v2 != "" {
		fd, err := unix.Open(s.v2, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("proctest: open %s: %w", s.v2, err)
		}
		defer unix.Close(fd)
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	return s.Run(cmd.Start)
}

// Run calls start with the calling goroutine's thread inside the v1 safety cgroups, so that
// a process start forks there (the fork happens on this thread, and the child inherits its
// cgroups): a test gives code under test that starts a command itself (a pgroup-tier
// killtree.Manager's Start) through it. Run locks the goroutine to its thread, moves the
// thread in, calls start, and moves the thread back. If moving back fails the goroutine stays
// locked to the thread, so the Go runtime ends the thread with the goroutine instead of
// reusing it (runtime.LockOSThread), and the failure is reported through t. Without v1
// cgroups Run just calls start (Start gives the v2 cgroup to clone3 itself).
func (s *Safety) Run(start func() error) error {
	if len(s.v1) == 0 {
		return start()
	}
	runtime.LockOSThread()
	back, err := s.enterV1()
	if err != nil {
		if s.leaveV1(back) {
			runtime.UnlockOSThread()
		}
		return err
	}
	err = start()
	if s.leaveV1(back) {
		runtime.UnlockOSThread()
	}
	return err
}

// LowCPU gives the safety cgroups the least CPU weight there is (v1 cpu.shares 2, v2
// cpu.weight 1 where the v2 cgroup has the cpu controller), so that a tree of hundreds of
// runnable processes started inside cannot starve the test process of the CPU it needs to
// measure its own latency. It skips the test when neither can be set.
func (s *Safety) LowCPU() {
	s.t.Helper()
	if dir := s.Dir("cpu"); dir != "" {
		if err := writeFile(filepath.Join(dir, "cpu.shares"), "2"); err != nil {
			s.t.Skipf("proctest: safety cpu weight: %v", err)
		}
		return
	}
	if s.v2 != "" {
		if err := writeFile(filepath.Join(s.v2, "cpu.weight"), "1"); err == nil {
			return
		}
	}
	s.t.Skip("proctest: no cpu cgroup for the safety weight")
}

// enterV1 moves the calling thread into the v1 safety cgroups and returns the tasks files
// that move it back, one per cgroup it entered.
func (s *Safety) enterV1() (back []string, err error) {
	tid := strconv.Itoa(unix.Gettid())
	orig, err := ownCgroups("/proc/thread-self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("proctest: thread cgroups: %w", err)
	}
	for _, c := range s.v1 {
		path, ok := orig[c.controller]
		if !ok {
			return back, fmt.Errorf("proctest: thread is in no %s cgroup", c.controller)
		}
		if err := writeFile(filepath.Join(c.dir, "tasks"), tid); err != nil {
			return back, fmt.Errorf("proctest: enter %s: %w", c.dir, err)
		}
		back = append(back, filepath.Join(c.mount, path, "tasks"))
	}
	return back, nil
}

// leaveV1 moves the calling thread back and reports whether that worked everywhere.
func (s *Safety) leaveV1(back []string) bool {
	tid := strconv.Itoa(unix.Gettid())
	ok := true
	for _, f := range back {
		if err := writeFile(f, tid); err != nil {
			s.t.Errorf("proctest: thread %s stays locked: cannot move it back to %s: %v", tid, f, err)
			ok = false
		}
	}
	return ok
}
