package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/corral-sh/corral/api"
)

// Version is corral's version, set at build time with -ldflags "-X main.Version=...".
var Version = "0.1.0-dev"

// errUsage marks a command-line mistake; it exits 2.
var errUsage = errors.New("usage")

// exitError carries an exit code out of a subcommand.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// Main is the CLI with its streams and environment injected, for tests.
type Main struct {
	Stdin          io.Reader // read by corral run --stdin -
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

const usage = `corral runs shell commands under supervision and returns a bounded result.

Usage:
  corral run [flags] -- COMMAND     run a command line, or PROGRAM ARG... (see corral run --help)
  corral serve [flags]              serve the HTTP API and MCP at /mcp (see corral serve --help)
  corral mcp [flags]                speak MCP over stdio (see corral mcp --help)
  corral doctor                     show every containment tier and which one is used
  corral version                    print the version

Environment:
  CORRAL_DATA_DIR      where spill files go (default: $XDG_DATA_HOME/corral or ~/.local/share/corral)
  CORRAL_CONTAINMENT   force a containment tier: cgroup2, cgroup1 or pgroup
  CORRAL_TOKEN         bearer token corral serve requires (never passed to commands;
                       without it or --token-file, serve generates one into DATA-DIR/token)
`

// Run runs the subcommand in args and returns the process exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = m.run(ctx, args[1:])
	case "serve":
		err = m.serve(ctx, args[1:])
	case "mcp":
		err = m.mcp(ctx, args[1:])
	case "doctor":
		err = m.doctor(args[1:])
	case "version", "--version":
		fmt.Fprintln(m.Stdout, "corral", Version)
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
	default:
		fmt.Fprintf(m.Stderr, "corral: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(m.Stderr, "corral:", errText(err))
		return 1
	}
}

// errText is err as the CLI prints it: the message HTTP and MCP give
// (api.Message), without the Go package prefixes ("supervisor: ",
// "journal: ") that error texts keep for logs.
func errText(err error) string {
	msg := api.Message(err)
	for {
		pkg, rest, ok := strings.Cut(msg, ": ")
		if !ok || !goPackages[pkg] {
			return msg
		}
		msg = rest
	}
}

// goPackages are the prefixes errText drops: corral's packages.
var goPackages = map[string]bool{"api": true, "budget": true, "capture": true, "envd": true, "journal": true,
	"killtree": true, "ringtail": true, "spill": true, "supervisor": true}
