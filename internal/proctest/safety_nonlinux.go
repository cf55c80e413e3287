//go:build !linux

package proctest

import (
	"os/exec"
	"testing"
)

// Safety is an outer cgroup for adversarial tests; cgroups exist only on Linux.
type Safety struct{ name string }

// Safe skips the test: cgroups exist only on Linux.
func Safe(t testing.TB, pidsMax int) *Safety {
	t.Helper()
	t.Skip(ErrNoCgroups.Error() + " (not Linux)")
	return nil
}

// Name returns the cgroup name.
func (s *Safety) Name() string { return s.name }

// Dir returns "": there are no cgroups here.
func (s *Safety) Dir(controller string) string { return "" }

// Start returns ErrNoCgroups.
func (s *Safety) Start(cmd *exec.Cmd) error { return ErrNoCgroups }

// Current returns ErrNoCgroups.
func (s *Safety) Current() (int, error) { return 0, ErrNoCgroups }
