package proctest

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Survivors lists the processes whose /proc/<pid>/environ holds CORRAL_TEST_MARKER=value,
// skipping the calling process. A zombie's environ can no longer be read, so zombies are found
// only while they are still exiting; Zombies finds them by parent instead. Processes that
// vanish or cannot be read during the scan are left out. It is safe for concurrent use.
func Survivors(value string) []Proc {
	want := []byte(MarkerEnv + "=" + value)
	self := os.Getpid()
	var found []Proc
	for _, pid := range pids() {
		if pid == self || !hasEnv(pid, want) {
			continue
		}
		if p, ok := readProc(pid); ok {
			found = append(found, p)
		}
	}
	return found
}

// NoSurvivors fails t if processes carrying the marker value are still alive after within,
// polling every 10 ms. It reports each with t.Errorf, then SIGKILLs them by PID through a pidfd
// (checking the marker again on the pidfd's process, so a reused PID is never hit) until none
// is left or five seconds have passed. It never waits for any process: zombies stay for their
// parent to reap (see Zombies).
func NoSurvivors(t testing.TB, value string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	left := Survivors(value)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		left = Survivors(value)
	}
	if len(left) == 0 {
		return
	}
	for _, p := range left {
		t.Errorf("proctest: survivor after %v: %v", within, p)
	}
	if rest := killMarked(value, 5*time.Second); len(rest) > 0 {
		t.Errorf("proctest: %d marked processes still alive after SIGKILL, first: %v", len(rest), rest[0])
	}
}

// killMarked SIGKILLs marked processes until none is left or limit has passed, and returns
// what is left. Each round kills every process found, so a fork bomb loses ground quickly.
func killMarked(value string, limit time.Duration) []Proc {
	want := []byte(MarkerEnv + "=" + value)
	deadline := time.Now().Add(limit)
	for {
		left := Survivors(value)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		for _, p := range left {
			killIfMarked(p.PID, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killIfMarked opens a pidfd for pid, checks the marker again now that the process cannot be
// replaced under us, and sends SIGKILL through the pidfd. Errors mean the process is gone.
func killIfMarked(pid int, want []byte) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // ESRCH: already gone.
	}
	defer unix.Close(fd)
	if !hasEnv(pid, want) {
		return // The PID was reused between the scan and the pidfd, or the process is a zombie.
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) // ESRCH: exited meanwhile.
}

// Zombies lists the zombie children of parent: processes in state Z whose PPID is parent.
func Zombies(parent int) []Proc {
	var found []Proc
	for _, pid := range pids() {
		if p, ok := readProc(pid); ok && p.Zombie() && p.PPID == parent {
			found = append(found, p)
		}
	}
	return found
}

// FDCount returns the number of file descriptors open in the calling process, not counting
// the one it opens to read /proc/self/fd. Compare a count taken before and after the code
// under test; it fails t if /proc/self/fd cannot be read. The Go runtime's poller opens two
// descriptors of its own (epoll and an eventfd) the first time any file is opened, so take the
// first count after the process has opened a file.
func FDCount(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("proctest: fd count: %v", err)
	}
	return len(ents) - 1
}

// Threads returns the number of threads of the calling process (the Threads line of
// /proc/self/status), or -1 if it cannot be read.
func Threads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return -1
}

// pids lists the numeric entries of /proc (thread group leaders only).
func pids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// hasEnv reports whether /proc/<pid>/environ holds the entry want exactly.
func hasEnv(pid int, want []byte) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for entry := range bytes.SplitSeq(b, []byte{0}) {
		if bytes.Equal(entry, want) {
			return true
		}
	}
	return false
}

// errStat reports a /proc/<pid>/stat line that does not parse.
var errStat = errors.New("proctest: malformed /proc/<pid>/stat")

// readProc reads pid's state, parent, comm and command line.
func readProc(pid int) (Proc, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Proc{}, false
	}
	p, err := parseStat(pid, string(b))
	if err != nil {
		return Proc{}, false
	}
	if cl, err := os.ReadFile(dir + "/cmdline"); err == nil {
		p.Cmdline = strings.TrimSpace(string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	return p, true
}

// parseStat parses "pid (comm) state ppid ...". comm may hold spaces and parentheses, so it
// ends at the last ')' (proc(5)).
func parseStat(pid int, s string) (Proc, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return Proc{}, errStat
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 2 {
		return Proc{}, errStat
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Proc{}, errStat
	}
	return Proc{PID: pid, PPID: ppid, State: f[0], Comm: s[open+1 : end]}, nil
}
