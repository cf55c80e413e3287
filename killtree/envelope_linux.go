package killtree

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// readEnvelope reads the limits this process lives under: in each cgroup
// hierarchy that carries them (v2, v1 pids, v1 memory), the limit files of
// this process's cgroup and of every ancestor up to the hierarchy's root as
// mounted here (a container sees its own cgroup namespace's root), and
// RLIMIT_NPROC when this process is not root.
func readEnvelope(cfg Config) Envelope {
	mnt := findMounts()
	var e Envelope
	pidsUp := func(root string) {
		if root == "" {
			return
		}
		own := filepath.Join(root, mnt.own[root])
		dir, n := leastUp(own, root, "pids.max")
		if n > 0 && (e.Pids == 0 || int(n) < e.Pids) {
			e.Pids, e.PidsSource = int(n), dir
			e.PidsUsed, _ = strconv.Atoi(strings.TrimSpace(readFileOr(filepath.Join(dir, "pids.current"))))
			e.events = uniq(eventsFile(dir), eventsFile(own))
		}
	}
	pidsUp(mnt.v1["pids"])
	pidsUp(mnt.v2)
	memUp := func(root, file string) {
		if root == "" {
			return
		}
		dir, n := leastUp(filepath.Join(root, mnt.own[root]), root, file)
		if n > 0 && (e.Memory == 0 || n < e.Memory) {
			e.Memory, e.MemorySource = n, dir
		}
	}
	memUp(mnt.v1["memory"], "memory.limit_in_bytes")
	memUp(mnt.v2, "memory.max")
	if os.Geteuid() != 0 {
		// The kernel checks RLIMIT_NPROC at fork against the tasks of the
		// real user (kernel/fork.c, copy_process), and never for root.
		var r unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_NPROC, &r) == nil && r.Cur != unix.RLIM_INFINITY && r.Cur < 1<<31 &&
			(e.Pids == 0 || int(r.Cur) < e.Pids) {
			e.Pids, e.PidsSource, e.PidsUsed, e.events = int(r.Cur), "RLIMIT_NPROC", threadCount(), nil
		}
	}
	e.share(cfg)
	return e
}

// leastUp reads file in dir and in each ancestor up to root and returns
// the directory of the least limit and the limit; 0 for none. "max", and
// cgroup v1's page-rounded 9223372036854771712, mean none.
func leastUp(dir, root, file string) (string, int64) {
	var at string
	var least int64
	for {
		if n, err := strconv.ParseInt(strings.TrimSpace(readFileOr(filepath.Join(dir, file))), 10, 64); err == nil && n > 0 && n < 1<<62 {
			if least == 0 || n < least {
				at, least = dir, n
			}
		}
		if dir == root || !strings.HasPrefix(dir, root) {
			return at, least
		}
		dir = filepath.Dir(dir)
	}
}

// eventsFile is the pids events file of cgroup dir that counts the forks
// refused there: pids.events.local where it exists (cgroup v2 since Linux
// 6.12, whose pids.events "max" counts the refusals at every descendant's
// limit too: cgroup-v2.rst, "PID"), else pids.events (v1, and v2 before
// it, count a refusal in the cgroup of the task that forked, whatever
// limit refused it).
func eventsFile(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "pids.events.local")); err == nil {
		return filepath.Join(dir, "pids.events.local")
	}
	return filepath.Join(dir, "pids.events")
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// refusals reads the "max" counters of the envelope's pids.events files,
// in the order of e.events.
func (e Envelope) refusals() []int64 {
	out := make([]int64, len(e.events))
	for i, f := range e.events {
		out[i] = eventCount(f, "max")
	}
	return out
}

// threadCount is the number of this process's threads.
func threadCount() int {
	n, _ := fieldValue(strings.ReplaceAll(readFileOr("/proc/self/status"), ":\t", " "), "Threads")
	return int(n)
}

// threadReserve is how many threads New makes this process hold, idle, when
// an envelope limits its tasks. The Go runtime keeps an idle thread for
// reuse and never ends it; a thread it needs later (a goroutine entered a
// blocking system call, sysmon hands its P on) is then taken from those
// instead of made, and making one is what fails, fatally, once a command
// has taken every task the envelope allows. On the cgroup tiers the
// commands' shares leave the reserve free anyway; on pgroup, which has no
// fork limit, the held threads are all corral has.
const threadReserve = 32

var holdOnce sync.Once

// holdThreads makes this process have more than threadReserve threads,
// once: as many goroutines lock a thread each at the same time, then
// unlock them and return, leaving the threads idle in the runtime's pool
// (runtime.LockOSThread: a goroutine that unlocks before it exits leaves
// its thread to the scheduler).
func holdThreads() {
	holdOnce.Do(func() {
		// Each locked goroutine has a thread of its own, idle ones
		// included: threadReserve of them make sure of threadReserve.
		n := threadReserve
		var locked, done sync.WaitGroup
		release := make(chan struct{})
		for range n {
			locked.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				runtime.LockOSThread()
				locked.Done()
				<-release
				runtime.UnlockOSThread()
			}()
		}
		locked.Wait()
		close(release)
		done.Wait()
	})
}

// capInstanceDir writes n as the pids.max of the instance directory dir
// (the parent of every leaf of this process), when n > 0 and it holds
// another value. Best effort: a failed write leaves each command's own
// limit, which is within the share too, and what many commands hold
// together is then bounded only by the envelope itself.
func capInstanceDir(dir string, n int) {
	if n <= 0 {
		return
	}
	f := filepath.Join(dir, "pids.max")
	if strings.TrimSpace(readFileOr(f)) != strconv.Itoa(n) {
		_ = writeFile(f, strconv.Itoa(n))
	}
}
