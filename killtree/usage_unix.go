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
			addRusage(&u, ru)
		}
	}
	return u
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
