//go:build !linux

package killtree

import (
	"os/exec"
	"syscall"
)

// wrapReaper does nothing: New refuses Config.Reaper off Linux.
func (t *Tree) wrapReaper(cmd *exec.Cmd) (undo func(started bool), err error) {
	return func(bool) {}, nil
}

// hasReaper is false: there is no reaper off Linux.
func (t *Tree) hasReaper() bool { return false }

// ShellExit returns ok false: without a reaper (Linux only) cmd.ProcessState
// is the shell's own.
func (t *Tree) ShellExit() (code int, sig syscall.Signal, ok bool) { return 0, 0, false }
