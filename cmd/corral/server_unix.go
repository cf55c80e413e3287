//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// execServer replaces this process with corral-server (see server).
func execServer(_ *Main, path string, args []string) error {
	err := syscall.Exec(path, append([]string{serverName}, args...), os.Environ())
	return fmt.Errorf("exec %s: %w", path, err)
}
