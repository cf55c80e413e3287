package main

import (
	"errors"
	"os/exec"

	"github.com/corral-sh/corral/cmd/internal/cli"
)

// execServer runs corral-server as a child with this process's streams and
// returns its exit code (Windows has no exec that keeps the process).
func execServer(m *Main, path string, args []string) error {
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = m.Stdin, m.Stdout, m.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return cli.ExitError{Code: ee.ExitCode()}
	}
	return err
}
