package killtree

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

// The job tier's containment, the Windows mirror of cgroup2_linux.go: a
// job object with kill-on-close (winjob_windows.go wraps the Win32 calls;
// jobctl.go holds the start and kill logic, tested on every OS).

// jobC is the job tier's containment.
type jobC struct {
	mu sync.Mutex
	j  *winJob // guarded by mu
}

func (c *jobC) start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP
	_, err := startInJob(c.j, func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	}, func() error {
		return errors.Join(cmd.Process.Kill(), cmd.Wait())
	})
	return err
}

func (c *jobC) procs() ([]int, error) { return c.j.pids() }

func (c *jobC) kill(time.Time) ([]int, error) {
	pids, err := c.j.pids()
	if err != nil {
		return nil, err
	}
	_, err = killJob(c.j, time.Now().Add(killDeadline))
	return pids, err
}

func (c *jobC) waitEmpty(ctx context.Context) error {
	return pollUntil(ctx, func() bool { n, err := c.j.active(); return err == nil && n == 0 })
}

func (c *jobC) pause(bool) error { return nil } // a job object cannot be frozen

func (c *jobC) destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.j.close()
}

func (c *jobC) dirs() []string { return nil }

// reached is never known here: the job's limits refuse an allocation or a
// process creation inside the process, they kill nothing.
func (c *jobC) reached() Limit { return "" }

// usage is the job's accounting (winJob.usage); zero once destroyed.
func (c *jobC) usage() Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.j == nil {
		return Usage{}
	}
	u, err := c.j.usage()
	if err != nil {
		return Usage{}
	}
	return u
}
