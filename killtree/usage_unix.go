//go:build unix

package killtree

import (
	"runtime"
	"syscall"
	"time"
)

// rusage is the reaped processes' part of Usage: the leader's rusage from
// cmd.Wait (wait4 reports the child and every descendant it waited for,
// getrusage(2) RUSAGE_CHILDREN) plus the orphans this tree reaped; zero
// until the caller reaped the leader.
func (t *Tree) rusage() Usage {
	t.mu.Lock()
	u := t.reaped
	t.mu.Unlock()
	if ps := t.cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			peak := u.PeakMemory
			addRusage(&u, ru)
			// The leader was started with CLONE_VM (os/exec's vfork), and
			// exec records the peak of the memory it left, which was
			// this process's (fs/exec.c, exec_mmap): its maxrss is
			// ours unless some process of the tree outgrew us.
			if u.PeakMemory <= selfPeak() {
				u.PeakMemory = peak
			}
		}
	}
	return u
}

// selfPeak is this process's own peak resident set in bytes.
func selfPeak() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) * 1024
}

// addRusage adds ru's CPU times to u and raises u's peak to ru's maxrss.
func addRusage(u *Usage, ru *syscall.Rusage) {
	u.CPUUser += time.Duration(ru.Utime.Nano())
	u.CPUSystem += time.Duration(ru.Stime.Nano())
	rss := int64(ru.Maxrss) * 1024 // KiB on Linux and the BSDs (getrusage(2))
	if runtime.GOOS == "darwin" {
		rss = int64(ru.Maxrss) // bytes on macOS
	}
	u.PeakMemory = max(u.PeakMemory, rss)
}
