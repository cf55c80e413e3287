//go:build unix

package supervisor

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/killtree"
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

// shellExit returns how the shell ended as its reaper reported it
// (killtree.Config.Reaper), in exitStatus's terms; ok is false when the
// leader was the shell itself, or the reaper died first.
func shellExit(t *killtree.Tree) (code int, sig string, ok bool) {
	code, s, ok := t.ShellExit()
	if ok && s != 0 {
		return -1, unix.SignalName(s), true
	}
	return code, "", ok
}
