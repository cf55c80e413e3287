//go:build linux

package integration

import (
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// escapeCase is a command that leaves processes behind, tries to leave the
// containment, or refuses to die, and what its Result must say.
type escapeCase struct {
	name    string
	command string
	timeout float64
	check   func(t *testing.T, r supervisor.Result)
}

// exitedLeaving checks a shell that exited 0 after printing want while
// leaving at least n processes running: the call returns after the settle
// with those processes counted as lingering and killed.
func exitedLeaving(want string, n int) func(*testing.T, supervisor.Result) {
	return func(t *testing.T, r supervisor.Result) {
		t.Helper()
		if exitCode(r) != 0 || r.TimedOut || r.Aborted {
			t.Errorf("exitCode %v timedOut %v aborted %v, want a clean exit 0", exitCode(r), r.TimedOut, r.Aborted)
		}
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("stdout %q does not contain %q", r.Stdout, want)
		}
		if r.Kill.Lingering < n || r.Kill.Processes < n {
			t.Errorf("kill %+v, want at least %d lingering processes killed", r.Kill, n)
		}
	}
}

// timedOutWith checks a command stopped at its timeout by signal sig after
// printing exactly stdout.
func timedOutWith(stdout, sig string) func(*testing.T, supervisor.Result) {
	return func(t *testing.T, r supervisor.Result) {
		t.Helper()
		if !r.TimedOut || r.ExitCode != nil || r.Signal != sig {
			t.Errorf("timedOut %v exitCode %v signal %q, want timed out by %s", r.TimedOut, exitCode(r), r.Signal, sig)
		}
		if r.Stdout != stdout {
			t.Errorf("stdout %q, want the partial output %q", r.Stdout, stdout)
		}
	}
}

// killedAfter checks a command that ignored SIGTERM, so that only SIGKILL at
// the end of the grace stopped it, after printing want (the writer's lines
// interleave with it).
func killedAfter(want string) func(*testing.T, supervisor.Result) {
	return func(t *testing.T, r supervisor.Result) {
		t.Helper()
		if !r.TimedOut || r.ExitCode != nil || r.Signal != "SIGKILL" {
			t.Errorf("timedOut %v exitCode %v signal %q, want timed out by SIGKILL", r.TimedOut, exitCode(r), r.Signal)
		}
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("stdout %q does not contain %q", r.Stdout, want)
		}
		if r.Kill.Processes < 3 {
			t.Errorf("kill %+v, want the shell, sleep and the writer killed", r.Kill)
		}
	}
}

// writer is a bash loop that ignores SIGPIPE and SIGTERM and writes to the
// inherited stdout every 100 ms.
const writer = `bash -c 'trap "" PIPE TERM; while :; do echo w; sleep 0.1; done'`

func escapeCases() []escapeCase {
	return []escapeCase{
		// A background child keeps the stdout pipe open after the shell exits.
		{"background-child", `sleep 1000 & echo started`, 0, exitedLeaving("started", 1)},
		// A writer in its own session keeps writing to stdout and ignores SIGTERM.
		{"setsid-writer", `setsid ` + writer + ` & echo started`, 0, exitedLeaving("started", 1)},
		// A double-forked daemon: setsid inside a subshell that exits, so the writer is reparented.
		{"double-fork", `( setsid ` + writer + ` & ); echo started`, 0, exitedLeaving("started", 1)},
		// The proctest escaper: a plain, a setsid and a double-forked writer, each ignoring SIGPIPE.
		{"escaper", proctest.Command("escaper", "60"), 0, exitedLeaving("started", 3)},
		// timeout(1) puts itself and its child in a process group of their own.
		{"timeout-sleep", `timeout 100 sleep 1000 & echo started`, 0, exitedLeaving("started", 2)},
		// nohup ignores SIGHUP and holds the pipe.
		{"nohup", `nohup sleep 1000 & echo started`, 0, exitedLeaving("started", 1)},
		// Job control gives the background job its own process group.
		{"set-m-job", `set -m; sleep 1000 & echo started`, 0, exitedLeaving("started", 1)},
		// A tree that ignores SIGTERM everywhere: the grace runs out and SIGKILL ends it.
		{"trap-term-tree", `trap '' TERM; (sleep 1000) & ` + writer + ` & echo started; sleep 1000`, 1,
			killedAfter("started")},
		// Partial output on timeout: what was printed before the kill is kept.
		{"partial-output", `echo before; printf 'no newline'; sleep 1000`, 1, timedOutWith("before\nno newline", "SIGTERM")},
	}
}

// TestEscapes runs every escape case through the CLI (in each containment
// tier; -short only the strongest), through the server and through the library, and checks the Result
// and that nothing carrying the case's marker is left.
func TestEscapes(t *testing.T) {
	warmUp(t)
	check := processOracles(t)
	defer check()
	t.Run("group", func(t *testing.T) {
		srv := startServer(t)
		sup := newLib(t, supervisor.Config{})
		fronts := []frontend{cliFrontend(""), srv.frontend(), libFrontend(sup)}
		if !testing.Short() {
			// The other tiers, forced through CORRAL_CONTAINMENT.
			fronts = append(fronts, cliFrontend("cgroup1"), cliFrontend("pgroup"))
		}
		for _, f := range fronts {
			for _, c := range escapeCases() {
				t.Run(f.name+"/"+c.name, func(t *testing.T) {
					t.Parallel()
					m := marker(t)
					r := f.run(t, call{command: c.command, marker: m, timeout: c.timeout})
					c.check(t, r)
					checkGone(t, m)
				})
			}
		}
	})
}
