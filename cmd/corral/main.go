package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral-sh/corral/cmd/internal/cli"
	"github.com/corral-sh/corral/cmd/internal/runcmd"
)

// Version is corral's version, set at build time with -ldflags "-X main.Version=...".
var Version = "0.1.0-dev"

func main() {
	ctx, interrupted := context.WithCancel(context.Background())
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		Interrupts: notifyInterrupts(interrupted)}
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// notifyInterrupts calls interrupted at the first SIGINT or SIGTERM. The
// handler is installed in the background: os/signal's first Notify starts
// two threads, and corral run's setup need not wait for them; its command
// does (Main.Interrupts). A signal that comes before ends corral as it would
// during the runtime's start, and nothing of the command runs yet (its
// watchdog, if started, removes what was made). The returned channel is
// closed once the handler is in place.
func notifyInterrupts(interrupted func()) <-chan struct{} {
	installed := make(chan struct{})
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		close(installed)
		<-ch
		interrupted()
	}()
	return installed
}

// Main is the CLI with its streams and environment injected, for tests.
type Main struct {
	Stdin          io.Reader // read by corral run --stdin -
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Interrupts, when set, is closed once SIGINT and SIGTERM cancel the
	// context Run is given (notifyInterrupts): corral run starts its
	// command only after.
	Interrupts <-chan struct{}
}

const usage = `corral runs shell commands under supervision and returns a bounded result.

Usage:
  corral run [flags] -- COMMAND     run a command line, or PROGRAM ARG... (see corral run --help)
  corral serve [flags]              serve the HTTP API and MCP at /mcp (see corral serve --help)
  corral mcp [flags]                speak MCP over stdio (see corral mcp --help)
  corral doctor                     show every containment tier and which one is used
  corral version                    print the version

serve, mcp and doctor are corral-server's, and so is run --tty (corral
loads no terminal emulator): corral executes it, found next to corral,
else on PATH.

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
		r := runcmd.Main{Stdin: m.Stdin, Stdout: m.Stdout, Stderr: m.Stderr, Getenv: m.Getenv, Interrupts: m.Interrupts,
			// corral loads no terminal emulator: a --tty run is
			// corral-server's, which has one.
			Elsewhere: func(args []string) error { return m.server(append([]string{"run"}, args...)) }}
		err = r.Run(ctx, args[1:])
	case "serve", "mcp", "doctor":
		err = m.server(args)
	case "version", "--version":
		fmt.Fprintln(m.Stdout, "corral", Version)
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
	default:
		fmt.Fprintf(m.Stderr, "corral: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return cli.Exit(err, m.Stderr, runcmd.ErrText)
}
