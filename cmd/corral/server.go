package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// serverName is the binary that holds serve, mcp and doctor, and run
// --tty: the HTTP, MCP, envd and sandboxd faces and what they import
// (prometheus, gRPC, protobuf, the MCP SDK), and the terminal emulator,
// live there, so that corral run, one process per command, does not
// initialise them (docs/startup.md).
const serverName = "corral-server"

// server runs corral-server with args (its subcommand first) in place of
// this process: on Unix by exec, so that the server keeps this process's
// PID, streams and signals and nothing of corral stays in between; on
// Windows as a child whose exit code becomes this one's.
func (m *Main) server(args []string) error {
	path, err := serverPath()
	if err != nil {
		return err
	}
	return execServer(m, path, args)
}

// serverPath finds corral-server next to this executable (as go install
// ./cmd/... puts them), else on PATH.
func serverPath() (string, error) {
	name := serverName
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	exe, err := os.Executable()
	if err == nil {
		next := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(next); err == nil && fi.Mode().IsRegular() {
			return next, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	} else if !errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%s: %w", serverName, err)
	}
	where := "this executable"
	if exe != "" {
		where = exe
	}
	return "", fmt.Errorf("serve, mcp, doctor and run --tty need %s, which is neither next to %s nor on PATH: install it too (go install ./cmd/corral ./cmd/corral-server)", serverName, where)
}
