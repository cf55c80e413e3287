//go:build unix

package supervisor

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// attach makes the slave the command's stdin, stdout, stderr and
// controlling terminal (killtree's Start adds Setsid: the shell leads a new
// session, and TIOCSCTTY on descriptor 0 makes the slave its terminal).
func (t *terminal) attach(cmd *exec.Cmd) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = t.slave, t.slave, t.slave
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
}

// readEnd returns a descriptor of the master for the output drain: a
// non-blocking duplicate, close-on-exec, that the drain owns.
func (t *terminal) readEnd() (int, error) {
	var fd int
	err := withFd(t.master, func(m int) (err error) {
		fd, err = unix.FcntlInt(uintptr(m), unix.F_DUPFD_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, os.NewSyscallError("dup", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("fcntl", err)
	}
	return fd, nil
}

// kind says what a read of the terminal waits for, from the slave's termios
// as the master reads it (on Linux the termios ioctls of a master act on
// its slave: drivers/tty/pty.c, tty_mode_ioctl): WaitKey without ICANON,
// WaitPassword with ICANON and without ECHO, else WaitLine.
func (t *terminal) kind() string {
	var tio *unix.Termios
	err := withFd(t.master, func(fd int) (err error) {
		tio, err = unix.IoctlGetTermios(fd, ioctlGetTermios)
		return err
	})
	switch {
	case err != nil:
		return WaitLine
	case tio.Lflag&unix.ICANON == 0:
		return WaitKey
	case tio.Lflag&unix.ECHO == 0:
		return WaitPassword
	}
	return WaitLine
}

// deviceOf returns f's device number (st_rdev), 0 when unknown.
func deviceOf(f *os.File) uint64 {
	var st unix.Stat_t
	if withFd(f, func(fd int) error { return unix.Fstat(fd, &st) }) != nil {
		return 0
	}
	return uint64(st.Rdev)
}

// ptyEOF reports whether a read error of the master means the end of the
// output: EIO once no process holds the slave open any more (a master
// reports hang-up so, not with a zero read: drivers/tty/n_tty.c).
func ptyEOF(err error) bool { return errors.Is(err, unix.EIO) }

// canTTY says a command can have a terminal here.
const canTTY = true
