package killtree

import (
	"fmt"
	"strconv"
	"time"

	"github.com/corral-sh/corral/killtree/internal/procfs"
	"golang.org/x/sys/unix"
)

// pipeInodes returns the /proc/<pid>/fd links that hold the given pipe
// ends. Both ends of a pipe share one inode, so a process whose
// /proc/<pid>/fd/N reads "pipe:[ino]" holds one of its ends. A
// pseudo-terminal's master stands for its slave: a process whose link reads
// "/dev/pts/N" (TIOCGPTN) keeps the master from reaching its end.
func pipeInodes(fds []int) (map[string]bool, error) {
	out := map[string]bool{}
	for _, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("killtree: stat pipe: %w", err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFCHR {
			if n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN); err == nil {
				out["/dev/pts/"+strconv.FormatUint(uint64(n), 10)] = true
			}
			continue
		}
		out["pipe:["+strconv.FormatUint(st.Ino, 10)+"]"] = true
	}
	return out, nil
}

// killPipeHolders SIGKILLs every holder of a watched pipe until a scan finds
// none (a holder can fork between scan and kill) or deadline passes, then
// reaps what it can. It returns how many holders it counted as escapees:
// each process once over the tree's life, and none that a Kill which gave
// up left as a survivor (that Kill classified it). A holder that outlives its SIGKILL
// has its frozen cgroups thawed where the tree may (thawFrozen); one still
// there at the deadline is left for Survivors to name.
func (t *Tree) killPipeHolders(pipes []int, deadline time.Time) (int, error) {
	links, err := pipeInodes(pipes)
	if err != nil {
		return 0, err
	}
	n := 0
	sigkilled := map[int]bool{}
	for {
		pids, err := procfs.Holders(links, selfPid)
		if err != nil {
			return n, err
		}
		if len(pids) == 0 {
			break
		}
		var stuck []int
		for _, p := range pids {
			start := procStart(p)
			t.mu.Lock()
			t.st.seen[p] = start // attribute it, so its zombie can be reaped
			t.mu.Unlock()
			if unix.Kill(p, unix.SIGKILL) != nil {
				continue // ESRCH: gone meanwhile
			}
			// A survivor of a Kill that gave up was classified by it.
			if !t.leftBehind(p, start) && t.countEscapee(p, []proc{{pid: p, start: start}}) {
				n++
			}
			if sigkilled[p] {
				stuck = append(stuck, p)
			}
			sigkilled[p] = true
		}
		if len(stuck) > 0 {
			t.thawFrozen(stuck)
		}
		if time.Now().After(deadline) {
			t.leftovers(pids)
			return n, fmt.Errorf("killtree: pipe holders %v: %w", pids, ErrNotEmpty)
		}
		time.Sleep(time.Millisecond) // let SIGKILL land before rescanning; not synchronisation
	}
	// Holders were ours (only this tree got these pipes): reap the orphans.
	if ps, err := t.scanTree(); err == nil {
		t.reapZombies(ps)
	}
	return n, nil
}
