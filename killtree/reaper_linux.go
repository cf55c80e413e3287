package killtree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The reaper (Config.Reaper) is this binary re-executed as a child
// subreaper between the Manager and the command: the containerd-shim and
// tini model. Every orphan of the command is reparented to it rather than to
// this process, so the tree is exactly the reaper's descendants, whatever a
// process did to its session, group, cgroups or environment, and however
// many trees this process runs at once.
//
// Why a re-executed binary: PR_SET_CHILD_SUBREAPER must be set by the
// process itself, Go's SysProcAttr has no hook between fork and exec to set
// it, and a Go program cannot fork without exec. The attribute survives
// execve (prctl(2)), but a shell made a subreaper would hand its orphans up
// to this process the moment it exits, which is exactly when the hole
// opens; the reaper must outlive the shell. So the cost is one Go runtime
// start per command (docs/performance.md), which is why it is an option and
// not the default.
//
// The protocol: the reaper is started as cmd with argv
// [reaperArg0, path, argv...] and reaperEnv=<fd>, where fd is the write end
// of a status pipe that follows the caller's descriptors. It starts path
// with argv as its child in its own session and group (it inherits them),
// closes its copies of the command's descriptors (so the pipes reach EOF
// when the command's processes are gone, not the reaper), writes the shell's
// 4-byte wait status to the pipe when the shell exits, closes it, and reaps
// every orphan until it has no child left; then it exits. The Tree takes
// the pipe's readability as the shell's exit (Exited, ExitFD) and the status
// from it (ShellExit). The reaper ignores the signals a command can send to
// its group (SIGTERM, SIGHUP, ...) so it outlives the shell's way down;
// SIGKILL ends it, and the kill does that last.
const (
	reaperArg0 = "corral-reaper"
	reaperEnv  = "CORRAL_KILLTREE_REAPER"
)

// reaperSignals are ignored by the reaper (through a handler, not SIG_IGN,
// which execve would hand on to the shell): the group and tree signals of
// the graceful phase and whatever a command sends to its process group.
var reaperSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGTERM, unix.SIGQUIT, unix.SIGPIPE,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGALRM, unix.SIGTSTP, unix.SIGTTIN,
	unix.SIGTTOU, unix.SIGVTALRM, unix.SIGXCPU, unix.SIGXFSZ,
}

// runReaper is the reaper's whole life; it returns its exit code.
func runReaper(fdArg, path string, argv []string) int {
	status, err := strconv.Atoi(fdArg)
	if err != nil || status < 3 {
		fmt.Fprintf(os.Stderr, "killtree: reaper: bad status descriptor %q\n", fdArg)
		return 127
	}
	unix.CloseOnExec(status)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "killtree: reaper: PR_SET_CHILD_SUBREAPER: %v\n", err)
		return 127
	}
	signal.Notify(make(chan os.Signal, 1), reaperSignals...) // never read: dropped
	files := make([]uintptr, status)
	for i := range files {
		files[i] = uintptr(i)
	}
	env := os.Environ()
	for i, kv := range env {
		if strings.HasPrefix(kv, reaperEnv+"=") {
			env = append(env[:i], env[i+1:]...)
			break
		}
	}
	shell, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: files})
	if err != nil {
		fmt.Fprintf(os.Stderr, "killtree: reaper: start %s: %v\n", path, err)
		return 127
	}
	releaseStdio(status)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: the tree is empty
			return 0
		}
		if pid == shell {
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], uint32(ws))
			_, _ = unix.Write(status, b[:]) // EPIPE: the Tree is closed, nobody asks
			unix.Close(status)
		}
	}
}

// releaseStdio points the reaper's descriptors below status at /dev/null
// (0–2) or closes them: only the command's processes may hold its pipes.
func releaseStdio(status int) {
	null, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	for fd := 0; fd < status; fd++ {
		if fd <= 2 && err == nil {
			_ = unix.Dup3(null, fd, 0)
		} else {
			unix.Close(fd)
		}
	}
	if err == nil && null > 2 {
		unix.Close(null)
	}
}

// wrapReaper rewrites cmd to start under a reaper when the Manager asks for
// one, and records the status pipe's read end. undo(started) closes the
// write end (the reaper has its copy) and gives the caller back its
// ExtraFiles; when the start failed it also closes the read end.
func (t *Tree) wrapReaper(cmd *exec.Cmd) (undo func(started bool), err error) {
	if !t.m.cfg.Reaper || cmd.Err != nil { // cmd.Err: Start reports it as it is
		return func(bool) {}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("killtree: reaper status pipe: %w", err)
	}
	extra := cmd.ExtraFiles
	fd := 3 + len(extra)
	cmd.ExtraFiles = append(extra[:len(extra):len(extra)], w)
	cmd.Env = append(cmd.Env, reaperEnv+"="+strconv.Itoa(fd))
	cmd.Args = append([]string{reaperArg0, cmd.Path}, cmd.Args...)
	cmd.Path = "/proc/self/exe"
	t.st.status = r
	return func(started bool) {
		w.Close()
		cmd.ExtraFiles = extra
		if !started {
			r.Close()
			t.st.status = nil
		}
	}, nil
}

// exitFile is the descriptor that turns readable when the shell exits: the
// reaper's status pipe, or the leader's pidfd. Caller holds t.mu.
func (t *Tree) exitFile() *os.File {
	if t.st.status != nil {
		return t.st.status
	}
	return t.st.pidfd
}

// ExitFD returns a new descriptor (close-on-exec, the caller closes it) that
// turns readable (poll POLLIN or POLLHUP) once the shell has exited, for a
// caller that watches the exit in its own poll loop: a pidfd of the leader,
// or, with Config.Reaper, the reaper's status pipe. Linux only.
func (t *Tree) ExitFD() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.exitFile()
	if f == nil {
		return -1, os.ErrClosed
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	dup := -1
	cerr := rc.Control(func(fd uintptr) {
		dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if err = errors.Join(cerr, err); err != nil {
		return -1, fmt.Errorf("killtree: exit descriptor: %w", err)
	}
	return dup, nil
}

// shellStatus returns the shell's wait status as the reaper reported it;
// ok is false without a reaper, or when the reaper died before the shell
// (the caller then has only the reaper's status from cmd.Wait).
func (t *Tree) shellStatus() (ws unix.WaitStatus, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &t.st
	if st.status != nil && !st.statusRead {
		st.statusRead = true
		rc, err := st.status.SyscallConn()
		if err == nil {
			var b [4]byte
			n := 0
			_ = rc.Control(func(fd uintptr) { n, _ = unix.Read(int(fd), b[:]) }) // EAGAIN: nothing was written
			if n == 4 {
				st.ws, st.wsOK = unix.WaitStatus(binary.LittleEndian.Uint32(b[:])), true
			}
		}
	}
	return st.ws, st.wsOK
}

// ShellExit returns how the shell ended when a reaper stood between it and
// this process (Config.Reaper): its exit code, or the signal that killed it
// (code -1). ok is false without a reaper, or when the reaper was killed
// before the shell ended; cmd.ProcessState then tells what happened to the
// leader. Call it after Kill and cmd.Wait.
func (t *Tree) ShellExit() (code int, sig syscall.Signal, ok bool) {
	ws, ok := t.shellStatus()
	if !ok {
		return 0, 0, false
	}
	if ws.Signaled() {
		return -1, ws.Signal(), true
	}
	return ws.ExitStatus(), 0, true
}

// rootGone reports whether the tree's root process has exited: the reaper
// when there is one (it outlives the shell), else the leader (the shell).
func (t *Tree) rootGone() bool {
	t.mu.Lock()
	reaper := t.st.status != nil
	t.mu.Unlock()
	if !reaper {
		return t.leaderExited()
	}
	return t.pidfdExited()
}

// reaperGrace is how long the first look at the members after the shell's
// exit waits for the reaper to follow it: a reaper with no other child exits
// at once, and then the tree is known gone without a kill.
const reaperGrace = 5 * time.Millisecond

// awaitReaper waits up to reaperGrace, once per tree, for the reaper to exit
// after the shell did.
func (t *Tree) awaitReaper() {
	if !t.hasReaper() || !t.leaderExited() {
		return
	}
	t.mu.Lock()
	f := t.st.pidfd
	ask := !t.st.awaited && f != nil
	t.st.awaited = true
	t.mu.Unlock()
	if !ask {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { // an error: f was closed, nothing to wait for
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, _ = unix.Poll(fds, int(reaperGrace.Milliseconds())) // EINTR or timeout: the caller looks anyway
	})
}

// hasReaper reports whether the leader is a reaper rather than the shell.
func (t *Tree) hasReaper() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.status != nil
}
