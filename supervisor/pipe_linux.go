package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// outputPipe returns a pipe for one of the child's output streams. The read
// end is non-blocking and served by the runtime's poller; the write end, the
// child's, is a plain blocking descriptor. os.Pipe would register both ends
// with the poller, and os/exec would then switch the child's end back to
// blocking mode: system calls for nothing, twice per command.
func outputPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}
