package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/cmd/internal/cli"
	"github.com/corral-sh/corral/cmd/internal/runcmd"
	"github.com/corral-sh/corral/supervisor"
	"github.com/corral-sh/corral/supervisor/vtemu"
)

// Version is corral's version, set at build time with -ldflags "-X main.Version=...".
var Version = "0.1.0-dev"

// The pieces shared with corral (cmd/internal/cli), under the names this
// package's files use.
var (
	errUsage       = cli.ErrUsage
	defaultDataDir = cli.DataDir
	tierCache      = cli.TierCache
	parseSize      = cli.ParseSize
)

type limitFlags = cli.Limits

// newEmulator is the terminal emulator of every Supervisor corral-server
// makes (supervisor.Config.Emulator).
func newEmulator(cols, rows int) supervisor.Emulator { return vtemu.New(cols, rows) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// Main is the server side of the CLI with its streams and environment
// injected, for tests.
type Main struct {
	Stdin          io.Reader // the MCP stdio transport's input
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

const usage = `corral-server serves corral: corral serve, corral mcp, corral doctor and
corral run --tty run it (it holds the HTTP, MCP, envd and sandboxd faces and
the terminal emulator, which corral run does not need to load). It takes the
same arguments as those commands.

Usage:
  corral-server serve [flags]       serve the HTTP API and MCP at /mcp (see corral serve --help)
  corral-server mcp [flags]         speak MCP over stdio (see corral mcp --help)
  corral-server doctor              show every containment tier and which one is used
  corral-server run [flags] -- CMD  corral run (corral hands its --tty runs here)
  corral-server version             print the version
`

// Run runs the subcommand in args and returns the process exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = m.serve(ctx, args[1:])
	case "mcp":
		err = m.mcp(ctx, args[1:])
	case "doctor":
		err = m.doctor(args[1:])
	case "run":
		// corral run --tty comes here: corral-server has the terminal
		// emulator corral does not load (cmd/internal/runcmd).
		r := runcmd.Main{Stdin: m.Stdin, Stdout: m.Stdout, Stderr: m.Stderr, Getenv: m.Getenv, Emulator: newEmulator}
		return cli.Exit(r.Run(ctx, args[1:]), m.Stderr, runcmd.ErrText)
	case "version", "--version":
		fmt.Fprintln(m.Stdout, "corral-server", Version)
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
	default:
		fmt.Fprintf(m.Stderr, "corral-server: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return cli.Exit(err, m.Stderr, errText)
}

// errText is err as the CLI prints it: the message HTTP and MCP give
// (api.Message), without the Go package prefixes.
func errText(err error) string { return cli.Plain(api.Message(err)) }
