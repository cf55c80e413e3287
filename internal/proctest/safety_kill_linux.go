package proctest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// cleanupLimit bounds how long the cleanup keeps killing and removing.
const cleanupLimit = 20 * time.Second

// cleanup kills every process in the safety cgroups and removes them. It is registered with
// t.Cleanup by Safe, and reports through t what it could not kill or remove.
//
// Each round writes cgroup.kill in the v2 cgroup where there is one (it kills the whole
// subtree at once), and in the v1 hierarchies does what runc's signalAllProcesses does:
// freeze, SIGKILL each member, thaw. A frozen v1 task cannot fork, exit or be replaced, so the
// PIDs read from cgroup.procs are still the members when they are killed; a SIGKILLed v1
// task stays frozen in D state until thawed (docs/killtree.md §2.6, E3), hence the thaw
// of every nested cgroup too.
func (s *Safety) cleanup() {
	deadline := time.Now().Add(cleanupLimit)
	for {
		s.rescueOwnThreads()
		procs := s.members()
		if len(procs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			s.t.Errorf("proctest: %d processes left in safety cgroup %s after %v, first pid %d",
				len(procs), s.name, cleanupLimit, procs[0])
			return
		}
		s.killRound()
		time.Sleep(10 * time.Millisecond) // Let the killed exit before the next scan.
	}
	if err := s.remove(); err != nil {
		s.t.Errorf("proctest: remove safety cgroup: %v", err)
	}
}

// killRound kills the members of the safety cgroups, read while the freezer holds them.
func (s *Safety) killRound() {
	if s.v2 != "" {
		// ENOENT: a kernel without cgroup.kill (before 5.14); the v1 loop and the per-PID
		// kills below still run.
		_ = writeFile(filepath.Join(s.v2, "cgroup.kill"), "1")
	}
	self := os.Getpid()
	// Never freeze a cgroup holding a thread of this process: rescueOwnThreads failed for it.
	if s.freezer != "" && !slices.Contains(readInts(filepath.Join(s.freezer, "cgroup.procs")), self) {
		_ = writeFile(filepath.Join(s.freezer, "freezer.state"), "FROZEN") // Best effort.
	}
	for _, pid := range s.members() {
		if pid != self {
			_ = unix.Kill(pid, unix.SIGKILL) // ESRCH: it exited meanwhile.
		}
	}
	if s.freezer != "" {
		for _, dir := range cgroupTree(s.freezer) {
			_ = writeFile(filepath.Join(dir, "freezer.state"), "THAWED")
		}
	}
}

// roots lists the top safety cgroup of every hierarchy.
func (s *Safety) roots() []string {
	var out []string
	for _, c := range s.v1 {
		out = append(out, c.dir)
	}
	if s.v2 != "" {
		out = append(out, s.v2)
	}
	return out
}

// members lists the processes in the safety cgroups and every cgroup nested in them, without
// the calling process.
func (s *Safety) members() []int {
	self := os.Getpid()
	var out []int
	for _, root := range s.roots() {
		for _, dir := range cgroupTree(root) {
			for _, pid := range readInts(filepath.Join(dir, "cgroup.procs")) {
				if pid != self && !slices.Contains(out, pid) {
					out = append(out, pid)
				}
			}
		}
	}
	return out
}

// rescueOwnThreads moves any thread of this process found in a v1 safety cgroup (left there
// by a Start whose move back failed) to the root of that hierarchy, so that the cleanup
// neither freezes nor kills its own process.
func (s *Safety) rescueOwnThreads() {
	for _, c := range s.v1 {
		for _, dir := range cgroupTree(c.dir) {
			for _, tid := range readInts(filepath.Join(dir, "tasks")) {
				if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err == nil {
					_ = writeFile(filepath.Join(c.mount, "tasks"), strconv.Itoa(tid)) // Checked by members.
				}
			}
		}
	}
}

// remove removes the safety cgroups, children before parents, retrying while the kernel still
// reports them busy. Cgroups already gone are fine.
func (s *Safety) remove() error {
	var errs []error
	deadline := time.Now().Add(5 * time.Second)
	for _, root := range s.roots() {
		for _, dir := range cgroupTree(root) {
			for {
				err := unix.Rmdir(dir)
				if err == nil || errors.Is(err, unix.ENOENT) {
					break
				}
				if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
					errs = append(errs, fmt.Errorf("rmdir %s: %w", dir, err))
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	return errors.Join(errs...)
}
