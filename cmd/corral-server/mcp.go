package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/corral-sh/corral/api"
)

const mcpUsage = `Usage: corral mcp [flags]

Speaks MCP over stdin and stdout (newline-delimited JSON-RPC) with the
tools bash (run a command, live output as progress notifications,
cancellation kills its tree; background: true starts a job; tty: true runs
it on a terminal; a yield returns as soon as it waits for input),
job_output, job_input, job_wait, job_kill, job_list and job_screen
(background jobs; job_screen shows a terminal job's screen), read_output
and grep_output (read back the spill file of a cut result), and history
(the session's last results). A line that is not
JSON-RPC (malformed, or longer than 16 MiB) gets a JSON-RPC error reply
(-32700) and is skipped; the server keeps serving. Logs go to stderr,
warnings only by default. The server ends when stdin closes or on SIGTERM /
SIGINT, killing what is still running, background jobs included.

Flags:
`

func (m *Main) mcp(ctx context.Context, args []string) error {
	var f serverFlags
	fs := m.serverFlagSet("corral mcp", mcpUsage, &f, false)
	fs.Lookup("log-level").DefValue = "warn"
	f.logLevel = "warn"
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "corral mcp: unexpected arguments %q\n", fs.Args())
		return errUsage
	}
	log, err := m.logger(f)
	if err != nil {
		fmt.Fprintln(m.Stderr, "corral mcp:", err)
		return errUsage
	}
	srv, _, closeAll, grace, err := m.newServer(f, "", mcpTimeoutHint, true, log)
	if err != nil {
		return err
	}
	defer closeAll()
	runErr := srv.ServeMCP(ctx, &api.LineTransport{In: m.Stdin, Out: m.Stdout})
	sctx, cancel := context.WithTimeout(context.Background(), grace+2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("commands still running at the deadline")
	}
	if runErr != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", runErr)
	}
	return nil
}
