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
// the baseline's.
type pgroupC struct{}

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

func (pgroupC) start(cmd *exec.Cmd) error {
	setSession(cmd)
	return cmd.Start()
}

func (pgroupC) procs() ([]int, error)               { return nil, nil }
func (pgroupC) kill(time.Time) ([]int, error)       { return nil, nil }
func (pgroupC) waitEmpty(ctx context.Context) error { return nil }
func (pgroupC) pause(bool) error                    { return nil }
func (pgroupC) destroy() error                      { return nil }
func (pgroupC) dirs() []string                      { return nil }
