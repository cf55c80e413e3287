package killtree

import (
	"context"
	"os"

	"github.com/corral-sh/corral/killtree/internal/procfs"

	"golang.org/x/sys/unix"
)

// proc is one line of a /proc pass: the fields of /proc/<pid>/stat the
// baseline needs.
type proc struct {
	pid, ppid, pgid, sid int
	state                byte   // 'R', 'S', 'Z', ...
	start                uint64 // start time in clock ticks since boot (field 22)
	threads              int    // num_threads (field 20)
}

func (p proc) zombie() bool { return p.state == 'Z' || p.state == 'X' }

// scanProcs reads /proc/<pid>/stat for every process: one pass, the ppid map
// the sweeps need. Processes that vanish during the pass are skipped.
func scanProcs() ([]proc, error) {
	pids, err := procfs.Pids()
	if err != nil {
		return nil, err
	}
	out := make([]proc, 0, len(pids))
	buf := make([]byte, 1024)
	for _, pid := range pids {
		if p, ok := readStat(pid, buf); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// selfPid is this process's PID (a process's PID never changes).
var selfPid = os.Getpid()

// openOwnChildren opens this process's main thread's children list,
// /proc/<pid>/task/<pid>/children, to keep for a Manager's life: re-read
// with pread, it costs a tenth of an open by path (BenchmarkChildrenRead).
// It returns nil without CONFIG_PROC_CHILDREN (the scans then fall back to a
// full /proc pass).
func openOwnChildren() *procfs.File {
	k, err := procfs.Open(procfs.ChildrenPath(selfPid), unix.O_RDONLY)
	if err != nil {
		return nil
	}
	return k
}

// scanDescendants lists the processes that can belong to the tree led by
// leader, zombies included: the leader's descendants, and this process's
// other children with theirs, except the other trees' leaders and the
// watchdogs (ownChildren), whose subtrees are never this tree's. It walks
// /proc/<pid>/task/<tid>/children, one stat read per process visited, instead
// of one per process on the machine.
//
// The children of this process are read from the main thread only. Orphans
// go there: the kernel hands them to the first living thread of the nearest
// subreaper (kernel/exit.c, find_new_reaper and find_alive_thread, Linux
// 3.19), and the main thread of a Go program lives as long as the process.
// Children forked by another thread are the trees' leaders and watchdogs,
// which are known, and whatever other code in this process started, which no
// tree claims. The leader's own subtree is walked from the leader; once the
// leader has exited it is an unreaped zombie and is not read at all.
//
// The kernel calls the children files imprecise while the tree changes
// (Documentation/filesystems/proc.rst); the sweeps stop the members and scan
// again until nothing new appears, which is the remedy the document names.
// This process's own list comes from own; without CONFIG_PROC_CHILDREN (own
// is nil) it falls back to a full /proc pass.
//
// A pass of a tree that keeps forking can take seconds (each read competes
// with the forks for the CPU): it stops with ctx.Err() once ctx is done,
// checked before each process it reads (a look costs far less than the
// reads it stands between).
func scanDescendants(ctx context.Context, own *procfs.File, leader int, leaderExited bool) ([]proc, error) {
	if own == nil {
		return scanProcs()
	}
	buf := make([]byte, 1024)
	var out []proc
	var queue []int
	if b, err := own.ReadAll(buf); err == nil {
		queue = procfs.ParsePids(b)
	} else {
		queue = procfs.Children(selfPid, 1, buf) // the Manager is closed
	}
	seen := map[int]bool{}
	if leaderExited {
		// An unreaped zombie whose children went to the main thread at
		// its exit: nothing to read and nothing it could claim.
		seen[leader] = true
	} else {
		queue = append(queue, leader)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if pid != leader && ownedElsewhere(pid) {
			continue
		}
		p, ok := readStat(pid, buf)
		if !ok {
			continue
		}
		out = append(out, p)
		if !p.zombie() { // a zombie's children were reparented when it exited
			queue = append(queue, procfs.Children(pid, p.threads, buf)...)
		}
	}
	return out, nil
}

// readStat parses /proc/<pid>/stat, read into buf.
func readStat(pid int, buf []byte) (proc, bool) {
	s, ok := procfs.ReadStat(pid, buf)
	return fromStat(s), ok
}

// fromStat is the proc of a parsed stat.
func fromStat(s procfs.Stat) proc {
	return proc{pid: s.Pid, ppid: s.PPid, pgid: s.Pgid, sid: s.Sid, state: s.State, start: s.Start, threads: s.Threads}
}

// procStart returns the start time of pid (field 22 of its stat), or 0.
func procStart(pid int) uint64 {
	p, ok := readStat(pid, make([]byte, 1024))
	if !ok {
		return 0
	}
	return p.start
}
