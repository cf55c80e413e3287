package supervisor

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's word on "blocked reading the job's input" (docs/terminals.md,
// "How waiting is detected"). For each process the tree lists, and each of
// its threads, /proc/PID/task/TID/syscall names the system call the thread
// is blocked in and its arguments (proc(5); "running" while it runs). A
// thread waits for the job's input when that call is:
//
//   - a read of one descriptor: read, readv, pread64, preadv, preadv2
//     (argument 0 is the descriptor);
//   - poll or ppoll with the descriptor among its pollfds, asking POLLIN
//     (the array is read from /proc/PID/mem at argument 0, argument 1
//     entries, at most maxPollFds);
//   - select or pselect6 with the descriptor in its read set (the bitmap
//     read from /proc/PID/mem at argument 1, for argument 0 descriptors, at
//     most 1024);
//   - epoll_wait, epoll_pwait or epoll_pwait2 on an epoll instance (argument
//     0) whose interest list (/proc/PID/fdinfo/EPFD, "tfd: N events: M")
//     holds the descriptor with EPOLLIN;
//
// and the descriptor's target (/proc/PID/fd/N) is the job's input: the
// stdin pipe ("pipe:[inode]", the inode of our own end), or the PTY's slave
// (its /dev/pts path, or /dev/tty for a process whose controlling terminal
// it is). A pipe another process of the tree feeds, a FIFO, a socket, a file
// or a sleep never matches: they are other inodes, or other calls. Reading
// /proc/PID/mem and /proc/PID/syscall needs ptrace access to the process
// (proc(5), PTRACE_MODE_ATTACH_FSCREDS): the supervisor's own commands, or
// root; a process it may not read is skipped, never guessed about.
//
// A sighting also carries the call's timeout (its argument, or the struct
// timespec or timeval it points to, read from /proc/PID/mem), so that the
// watch can tell a short "is another key coming" wait from the end of a
// turn (waiting.go).

// maxPollFds bounds the pollfd array read from a poll call.
const maxPollFds = 256

// findReader returns the first thread of pids blocked reading tgt.
func findReader(pids []int, tgt inputTarget, buf []byte) (sighting, bool) {
	for _, pid := range pids {
		base := "/proc/" + strconv.Itoa(pid)
		tids := []string{strconv.Itoa(pid)}
		if d, err := os.Open(base + "/task"); err == nil {
			if names, err := d.Readdirnames(-1); err == nil && len(names) > 0 {
				tids = names
			}
			d.Close()
		}
		for _, tid := range tids {
			if r, ok := threadReads(pid, tid, tgt, buf); ok {
				return r, true
			}
		}
	}
	return sighting{}, false
}

// recheck reports whether the thread of r still reads the job's input.
func recheck(r reader, tgt inputTarget, buf []byte) (sighting, bool) {
	got, ok := threadReads(r.pid, strconv.Itoa(r.tid), tgt, buf)
	return got, ok && got.r == r
}

// threadReads reports whether thread tid of pid is blocked reading tgt.
func threadReads(pid int, tid string, tgt inputTarget, buf []byte) (sighting, bool) {
	base := "/proc/" + strconv.Itoa(pid)
	b, ok := readSmall(base+"/task/"+tid+"/syscall", buf)
	if !ok {
		return sighting{}, false
	}
	// "NR ARG0 ... ARG5 SP PC" (proc(5)); "running", or "-1 SP PC" outside
	// a call.
	f := strings.Fields(string(b))
	if len(f) < 7 || f[0] == "running" {
		return sighting{}, false
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return sighting{}, false
	}
	arg := func(i int) uint64 {
		v, _ := strconv.ParseUint(strings.TrimPrefix(f[1+i], "0x"), 16, 64)
		return v
	}
	call, ok := syscallWait(nr)
	if !ok {
		return sighting{}, false
	}
	family := call.family
	var fds []int
	switch family {
	case "read":
		fds = []int{int(int32(arg(0)))}
	case "poll":
		fds = pollFds(pid, arg(0), arg(1))
	case "select":
		fds = selectFds(pid, arg(0), arg(1))
	case "epoll":
		fds = epollFds(base, int(int32(arg(0))), buf)
	}
	t, _ := strconv.Atoi(tid)
	for _, fd := range fds {
		if fd >= 0 && isInput(base, fd, tgt) {
			return sighting{r: reader{pid: pid, tid: t, fd: fd, call: family},
				timeout: callTimeout(pid, call, arg(call.tArg))}, true
		}
	}
	return sighting{}, false
}

// callTimeout returns the timeout of a waiting call c of pid whose timeout
// argument is a: noTimeout when it has none (or its struct cannot be read:
// then it is taken as a wait without one, as before the timeout was read).
// A select's timeval is the one it was called with while it sleeps (the
// kernel writes the time left into it only when the call returns).
func callTimeout(pid int, c waitCall, a uint64) time.Duration {
	switch c.tForm {
	case tMillis:
		if ms := int32(a); ms >= 0 {
			return time.Duration(ms) * time.Millisecond
		}
	case tTimespec, tTimeval:
		if a == 0 {
			return noTimeout
		}
		// Two longs: seconds, then nanoseconds (timespec) or
		// microseconds (timeval).
		word := bits.UintSize / 8
		b := make([]byte, 2*word)
		if !readMem(pid, a, b) {
			return noTimeout
		}
		var sec, frac int64
		if word == 8 {
			sec, frac = int64(binary.NativeEndian.Uint64(b)), int64(binary.NativeEndian.Uint64(b[8:]))
		} else {
			sec, frac = int64(int32(binary.NativeEndian.Uint32(b))), int64(int32(binary.NativeEndian.Uint32(b[4:])))
		}
		if sec < 0 || frac < 0 || sec > int64(maxCallTimeout/time.Second) {
			return noTimeout // invalid (the call fails at once) or longer than any turn
		}
		unit := time.Nanosecond
		if c.tForm == tTimeval {
			unit = time.Microsecond
		}
		return time.Duration(sec)*time.Second + time.Duration(frac)*unit
	}
	return noTimeout
}

// maxCallTimeout bounds the timeouts callTimeout reports; a longer one is
// none (it cannot end a short wait: see keyTimeout).
const maxCallTimeout = 24 * time.Hour

// isInput reports whether descriptor fd of the process at base is the job's
// input.
func isInput(base string, fd int, tgt inputTarget) bool {
	link, err := os.Readlink(base + "/fd/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	switch {
	case tgt.pipeLink != "":
		return link == tgt.pipeLink
	case link == tgt.ttyPath:
		return true
	case link == "/dev/tty":
		// The controlling terminal, opened by name (sudo, ssh, getpass):
		// ours when the process's tty_nr is the slave.
		pid, _ := strconv.Atoi(strings.TrimPrefix(base, "/proc/"))
		return ttyNr(pid) == tgt.ttyDev
	}
	return false
}

// ttyNr returns field 7 of /proc/PID/stat, the controlling terminal's device
// number (0: none).
func ttyNr(pid int) uint64 {
	var buf [512]byte
	b, ok := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	if !ok {
		return 0
	}
	// The name (field 2) is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 5 {
		return 0
	}
	n, _ := strconv.ParseInt(f[4], 10, 64) // state ppid pgrp session tty_nr
	return uint64(uint32(n))
}

// pollFds returns the descriptors of the pollfd array at addr (n entries)
// that ask for POLLIN.
func pollFds(pid int, addr, n uint64) []int {
	n = min(n, maxPollFds)
	if n == 0 {
		return nil
	}
	b := make([]byte, 8*n)
	if !readMem(pid, addr, b) {
		return nil
	}
	var fds []int
	for i := range int(n) {
		e := b[8*i:]
		fd := int32(binary.NativeEndian.Uint32(e))
		events := binary.NativeEndian.Uint16(e[4:])
		if events&(unix.POLLIN|pollRdNorm) != 0 {
			fds = append(fds, int(fd))
		}
	}
	return fds
}

// selectFds returns the descriptors set in the fd_set at addr, for the
// first n descriptors.
func selectFds(pid int, n, addr uint64) []int {
	n = min(n, 1024)
	if n == 0 || addr == 0 {
		return nil
	}
	b := make([]byte, (n+63)/64*8) // fd_set is an array of longs
	if !readMem(pid, addr, b) {
		return nil
	}
	var fds []int
	for fd := range int(n) {
		if b[fd/8]&(1<<(fd%8)) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

// epollFds returns the descriptors an epoll instance watches for input,
// from its fdinfo (fs/eventpoll.c ep_show_fdinfo: "tfd: %8d events: %8x").
func epollFds(base string, epfd int, buf []byte) []int {
	b, ok := readSmall(base+"/fdinfo/"+strconv.Itoa(epfd), buf)
	if !ok {
		return nil
	}
	var fds []int
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
			continue
		}
		fd, err1 := strconv.Atoi(f[1])
		ev, err2 := strconv.ParseUint(f[3], 16, 32)
		if err1 == nil && err2 == nil && ev&(unix.EPOLLIN|unix.EPOLLRDNORM) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

// readMem reads len(b) bytes of pid's memory at addr.
func readMem(pid int, addr uint64, b []byte) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return false
	}
	defer f.Close()
	n, err := f.ReadAt(b, int64(addr))
	return err == nil && n == len(b)
}

// readSmall reads a small /proc file into buf (whose size bounds it).
func readSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	return buf[:n], true
}

// pipeLink returns the /proc/PID/fd link of the pipe f is an end of.
func pipeLink(f *os.File) string {
	var st unix.Stat_t
	if withFd(f, func(fd int) error { return unix.Fstat(fd, &st) }) != nil {
		return ""
	}
	return "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
}

// pipeUnread returns how many bytes wait unread in the pipe f is an end of
// (FIONREAD, which is TIOCINQ, works on either end: fs/pipe.c pipe_ioctl).
func pipeUnread(f *os.File) int {
	var n int
	withFd(f, func(fd int) (err error) {
		n, err = unix.IoctlGetInt(fd, unix.TIOCINQ)
		return err
	})
	return n
}

// procArgv returns pid's command line (at most maxArgvBytes of it).
func procArgv(pid int) []string {
	var buf [maxArgvBytes]byte
	b, ok := readSmall("/proc/"+strconv.Itoa(pid)+"/cmdline", buf[:])
	if !ok {
		return nil
	}
	b = bytes.TrimRight(b, "\x00")
	return strings.Split(string(b), "\x00")
}

// maxArgvBytes bounds the command line a waiting reports.
const maxArgvBytes = 1024

// pollRdNorm is POLLRDNORM (include/uapi/asm-generic/poll.h), which x/sys
// does not name.
const pollRdNorm = 0x040

// canWatchInput says this OS lets the waiting watch run.
const canWatchInput = true
