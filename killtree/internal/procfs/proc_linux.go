package procfs

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stat holds the fields of /proc/<pid>/stat that killtree uses.
type Stat struct {
	Pid, PPid, Pgid, Sid int
	State                byte   // 'R', 'S', 'Z', ...
	Start                uint64 // start time in clock ticks since boot (field 22)
	Threads              int    // num_threads (field 20)
}

// Zombie reports whether the process has exited and awaits its reaping.
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// ReadStat reads and parses /proc/<pid>/stat into buf (1 KiB holds it);
// ok is false when the process is gone or the text does not parse.
func ReadStat(pid int, buf []byte) (Stat, bool) {
	b, err := ReadOnce("/proc/"+strconv.Itoa(pid)+"/stat", buf)
	if err != nil || len(b) == 0 {
		return Stat{}, false
	}
	return ParseStat(pid, b)
}

// ParseStat parses the text of /proc/<pid>/stat. The command name may
// contain spaces and parentheses, so the fields start after the last ')'.
func ParseStat(pid int, b []byte) (Stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return Stat{}, false
	}
	s := Stat{Pid: pid, State: f[0][0]}
	s.PPid, _ = strconv.Atoi(f[1])
	s.Pgid, _ = strconv.Atoi(f[2])
	s.Sid, _ = strconv.Atoi(f[3])
	s.Threads, _ = strconv.Atoi(f[17])
	s.Start, _ = strconv.ParseUint(f[19], 10, 64)
	return s, true
}

// Pids lists the processes in /proc.
func Pids() ([]int, error) {
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

// ParsePids parses a list of decimal PIDs separated by anything else
// (cgroup.procs, a task's children file).
func ParsePids(b []byte) []int {
	var out []int
	n, in := 0, false
	for _, c := range b {
		if c >= '0' && c <= '9' {
			n, in = n*10+int(c-'0'), true
			continue
		}
		if in {
			out = append(out, n)
		}
		n, in = 0, false
	}
	if in {
		out = append(out, n)
	}
	return out
}

// EnvironHas reports whether /proc/<pid>/environ holds the exact entry kv.
// A zombie's environment is empty, and reading another user's needs
// privileges; both read as false. A process in the middle of execve reads
// as empty or unreadable for a moment (its old mm is going away): it looks
// again a few times, a millisecond apart, rather than miss an orphan that
// just exec'd, as `( setsid cmd & )` leaves one.
func EnvironHas(pid int, kv string) bool {
	path := "/proc/" + strconv.Itoa(pid) + "/environ"
	b, err := ReadFile(path, nil)
	for try := 0; (err != nil || len(b) == 0) && try < 5; try++ {
		if _, serr := os.Stat("/proc/" + strconv.Itoa(pid)); serr != nil {
			return false // gone
		}
		time.Sleep(time.Millisecond) // waiting out an exec in progress; not synchronisation
		b, err = ReadFile(path, nil)
	}
	return err == nil && anyEntry(b, func(e []byte) bool { return string(e) == kv })
}

// EnvironHasPrefix reports whether /proc/<pid>/environ, read into buf,
// holds an entry that starts with prefix. Unlike EnvironHas it reads once:
// it is for passes over every process (kernel threads and zombies read
// empty), which repeat while they find something.
func EnvironHasPrefix(pid int, prefix string, buf []byte) bool {
	b, err := ReadFile("/proc/"+strconv.Itoa(pid)+"/environ", buf)
	return err == nil && anyEntry(b, func(e []byte) bool { return bytes.HasPrefix(e, []byte(prefix)) })
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

// InCgroup reports whether /proc/<pid>/cgroup names a cgroup whose path
// ends with leaf (a zombie keeps its cgroup until it is reaped).
func InCgroup(pid int, leaf string) bool {
	b, err := ReadFile("/proc/"+strconv.Itoa(pid)+"/cgroup", nil)
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasSuffix(line, leaf) {
			return true
		}
	}
	return false
}
