//go:build unix

package killtree

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// pgroupC is the pgroup tier's containment: nothing but a new session, so
// the leader's PID is also its session and process group ID. All the work is
// the baseline's. memory, when positive, becomes the shell's RLIMIT_AS
// from its first instruction (Linux, rlimitCmd), which its children inherit.
type pgroupC struct{ memory int64 }

// setSession asks for a new session and group, keeping the caller's other
// SysProcAttr fields. Setpgid is cleared: setpgid on a session leader fails.
func setSession(cmd *exec.Cmd) *syscall.SysProcAttr {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setpgid = false
	return cmd.SysProcAttr
}

func (c pgroupC) start(cmd *exec.Cmd) error {
	setSession(cmd)
	if err := rlimitCmd(cmd, c.memory); err != nil {
		return err
	}
	return cmd.Start()
}

func (pgroupC) procs() ([]int, error)               { return nil, nil }
func (pgroupC) kill(time.Time) ([]int, error)       { return nil, nil }
func (pgroupC) waitEmpty(ctx context.Context) error { return nil }
func (pgroupC) pause(bool) error                    { return nil }
func (pgroupC) destroy() error                      { return nil }
func (pgroupC) dirs() []string                      { return nil }
