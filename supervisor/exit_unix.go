//go:build unix

package supervisor

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// exitStatus returns the shell's exit code, or the name of the signal that
// ended it ("SIGKILL"); sig is "" when it exited by itself.
func exitStatus(ps *os.ProcessState) (code int, sig string) {
	if ps == nil {
		return -1, ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, unix.SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}
