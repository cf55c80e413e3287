package killtree

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

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
	pids, err := listPids()
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

// listPids lists the processes in /proc.
func listPids() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// selfPid is this process's PID (a process's PID never changes).
var selfPid = os.Getpid()

// openOwnChildren opens this process's main thread's children list,
// /proc/<pid>/task/<pid>/children, to keep for a Manager's life: re-read
// with pread, it costs a tenth of an open by path (BenchmarkChildrenRead;
// README, Performance). It
// returns nil without CONFIG_PROC_CHILDREN (the scans then fall back to a
// full /proc pass).
func openOwnChildren() *kernelFD {
	path := "/proc/" + strconv.Itoa(selfPid) + "/task/" + strconv.Itoa(selfPid) + "/children"
	k, err := openKernelFD(path, unix.O_RDONLY)
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
// checked every scanCheck processes.
func scanDescendants(ctx context.Context, own *kernelFD, leader int, leaderExited bool) ([]proc, error) {
	if own == nil {
		return scanProcs()
	}
	buf := make([]byte, 1024)
	var out []proc
	var queue []int
	if b, err := own.readAll(buf); err == nil {
		queue = parsePids(b)
	} else {
		queue = childrenOf(selfPid, 1, buf) // the Manager is closed
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
		if len(seen)%scanCheck == 0 && ctx.Err() != nil {
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
			queue = append(queue, childrenOf(pid, p.threads, buf)...)
		}
	}
	return out, nil
}

// scanCheck is how many processes a scan reads between two looks at its
// context.
const scanCheck = 32

// childrenOf lists the children of every thread of pid (threads 1: only the
// main thread, without listing /proc/<pid>/task).
func childrenOf(pid, threads int, buf []byte) []int {
	base := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids := []string{strconv.Itoa(pid)}
	if threads != 1 {
		d, err := os.Open(base)
		if err != nil {
			return nil
		}
		tids, _ = d.Readdirnames(-1)
		d.Close()
	}
	var out []int
	for _, tid := range tids {
		b, err := readKernelFile(base+tid+"/children", buf)
		if err == nil {
			out = append(out, parsePids(b)...)
		}
	}
	return out
}

// readStat parses /proc/<pid>/stat, read into buf.
func readStat(pid int, buf []byte) (proc, bool) {
	b, err := readKernelOnce("/proc/"+strconv.Itoa(pid)+"/stat", buf)
	if err != nil || len(b) == 0 {
		return proc{}, false
	}
	return parseStat(pid, b)
}

// parseStat parses the text of /proc/<pid>/stat. The command name may
// contain spaces and parentheses, so the fields start after the last ')'.
func parseStat(pid int, b []byte) (proc, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return proc{}, false
	}
	p := proc{pid: pid, state: f[0][0]}
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgid, _ = strconv.Atoi(f[2])
	p.sid, _ = strconv.Atoi(f[3])
	p.threads, _ = strconv.Atoi(f[17])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	return p, true
}

// environHas reports whether /proc/<pid>/environ holds the exact entry kv.
// A zombie's environment is empty, and reading another user's needs
// privileges; both read as false.
func environHas(pid int, kv string) bool {
	return environAny(pid, nil, func(e []byte) bool { return string(e) == kv })
}

// environHasPrefix reports whether /proc/<pid>/environ, read into buf,
// holds an entry that starts with prefix. Unlike environHas it reads once:
// it is for passes over every process (kernel threads and zombies read
// empty), which repeat while they find something.
func environHasPrefix(pid int, prefix string, buf []byte) bool {
	b, err := readKernelFile("/proc/"+strconv.Itoa(pid)+"/environ", buf)
	return err == nil && anyEntry(b, func(e []byte) bool { return bytes.HasPrefix(e, []byte(prefix)) })
}

// environAny reports whether an entry of /proc/<pid>/environ, read into
// buf, satisfies match.
func environAny(pid int, buf []byte, match func([]byte) bool) bool {
	path := "/proc/" + strconv.Itoa(pid) + "/environ"
	b, err := readKernelFile(path, buf)
	// A process in the middle of execve reads as empty or unreadable for
	// a moment (its old mm is going away): look again a few times rather
	// than miss an orphan that just exec'd, as `( setsid cmd & )` leaves one.
	for try := 0; (err != nil || len(b) == 0) && try < 5; try++ {
		if _, serr := os.Stat("/proc/" + strconv.Itoa(pid)); serr != nil {
			return false // gone
		}
		time.Sleep(time.Millisecond) // waiting out an exec in progress; not synchronisation
		b, err = readKernelFile(path, buf)
	}
	return err == nil && anyEntry(b, match)
}

// anyEntry reports whether an entry of the NUL-separated list b satisfies
// match.
func anyEntry(b []byte, match func([]byte) bool) bool {
	for e := range bytes.SplitSeq(b, []byte{0}) {
		if len(e) > 0 && match(e) {
			return true
		}
	}
	return false
}

// procStart returns the start time of pid (field 22 of its stat), or 0.
func procStart(pid int) uint64 {
	p, ok := readStat(pid, make([]byte, 1024))
	if !ok {
		return 0
	}
	return p.start
}
