//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
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
	proctest.Heavy(t)
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

// TestEscapeScrubbed runs the hole 1 and hole 2 daemons (setsid,
// `env -i`, `exec -a`, the parent gone at once; the root variant also
// leaves every cgroup) through the CLI, which runs one tree and so owns every
// orphan that reaches it (killtree.Config.SoleTree), on every tier; through
// the library with a per-command reaper (killtree.Config.Reaper) on pgroup
// and the strongest tier; and through the server with and without a reaper
// (without one, it owns every orphan born while only one command ran:
// killtree.Config.OwnProcess). The environment marker is scrubbed, so the
// test tracks each daemon by a pidfd taken from the PID it wrote to a file.
func TestEscapeScrubbed(t *testing.T) {
	proctest.Heavy(t)
	warmUp(t)
	check := processOracles(t)
	defer check()
	var leave string
	if os.Geteuid() == 0 {
		for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/freezer"} {
			if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err == nil {
				leave += "echo $$ > " + root + "/cgroup.procs; "
			}
		}
	}
	daemon := func(pidfile, first string) string {
		return `(setsid env -i /bin/bash -c '` + first + `echo $$ > ` + pidfile + `; exec -a X sleep 1000' </dev/null >/dev/null 2>&1 &); ` +
			`while [ ! -s ` + pidfile + ` ]; do sleep 0.01; done; echo hi`
	}
	// In a subtest: the libraries' Supervisors close at its end, before
	// the descriptor oracle looks.
	t.Run("group", func(t *testing.T) {
		fronts := []frontend{cliFrontend(""), cliFrontend("pgroup"),
			libFrontend(newLib(t, supervisor.Config{Containment: killtree.Config{Tier: killtree.TierPgroup, Reaper: true}})),
			libFrontend(newLib(t, supervisor.Config{Containment: killtree.Config{Reaper: true}}))}
		srv := startServer(t, "--reaper")
		fronts[2].name, fronts[3].name = "library-reaper-pgroup", "library-reaper"
		fronts = append(fronts, srv.frontend())
		fronts[4].name = "server-reaper"
		// Without a reaper the server still owns every orphan born while
		// only its command ran (killtree.Config.OwnProcess); the cases
		// run one at a time.
		plain, plainPgroup := startServer(t), startServer(t, "--containment", "pgroup")
		fronts = append(fronts, plain.frontend(), plainPgroup.frontend())
		fronts[5].name, fronts[6].name = "server", "server-pgroup"
		if !testing.Short() {
			fronts = append(fronts, cliFrontend("cgroup1"))
		}
		for _, f := range fronts {
			for _, c := range []struct{ name, first string }{{"env-i", ""}, {"root-escape", leave}} {
				if c.name == "root-escape" && leave == "" {
					continue // not root: no cgroup to leave
				}
				t.Run(f.name+"/"+c.name, func(t *testing.T) {
					pidfile := filepath.Join(t.TempDir(), "pid")
					r := f.run(t, call{command: daemon(pidfile, c.first), marker: marker(t)})
					if exitCode(r) != 0 || !strings.Contains(r.Stdout, "hi") {
						t.Errorf("exitCode %v stdout %q, want 0 and hi", exitCode(r), r.Stdout)
					}
					if r.Kill.Processes < 1 {
						t.Errorf("kill %+v, want the daemon killed", r.Kill)
					}
					checkPidfileDead(t, pidfile)
				})
			}
		}
	})
}

// checkPidfileDead fails t if the process whose PID the file holds is alive
// a second from now, and kills it then.
func checkPidfileDead(t *testing.T, pidfile string) {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q", b)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone, and reaped
	}
	defer unix.Close(fd)
	if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 1000); n == 0 {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		t.Errorf("the daemon %d survived", pid)
	}
}

// TestEscapeScrubbedConcurrent: the server without a reaper, on pgroup, runs
// command B while command A runs. B leaves a scrubbed daemon, born while
// both ran: no rule can tell whose it is. B's Result says so and names it,
// and the daemon is left running; A, ending last, kills it, and its Result
// says it killed a process that it or a command beside it left.
func TestEscapeScrubbedConcurrent(t *testing.T) {
	srv := startServer(t, "--containment", "pgroup")
	dir := t.TempDir()
	started, release, pidfile := filepath.Join(dir, "started"), filepath.Join(dir, "release"), filepath.Join(dir, "pid")
	type outcome struct {
		res supervisor.Result
		err error
	}
	ach := make(chan outcome, 1)
	go func() {
		body := api.ExecRequest{Command: "touch " + started + "; while [ ! -e " + release + " ]; do sleep 0.05; done",
			Env: map[string]string{proctest.MarkerEnv: marker(t)}}
		resp, err := srv.client.Do(srv.request(context.Background(), http.MethodPost, "/v1/exec", body))
		if err != nil {
			ach <- outcome{err: err}
			return
		}
		defer resp.Body.Close()
		var r supervisor.Result
		ach <- outcome{r, json.NewDecoder(resp.Body).Decode(&r)}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command A never started")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	b := srv.frontend().run(t, call{marker: marker(t), command: `(setsid env -i /bin/bash -c 'echo $$ > ` + pidfile +
		`; exec -a X sleep 1000' </dev/null >/dev/null 2>&1 &); while [ ! -s ` + pidfile + ` ]; do sleep 0.01; done; echo hi`})
	pid, err := strconv.Atoi(strings.TrimSpace(string(must(os.ReadFile(pidfile)))))
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("the daemon is gone already: %v", err)
	}
	defer unix.Close(fd)
	defer unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	want := "born while this command and another still running one ran cannot be told apart and was left running: pid " + strconv.Itoa(pid) + " (sleep)"
	if !strings.Contains(b.Stderr, want) || b.Kill.Processes != 0 {
		t.Errorf("B's Result: stderr %q kill %+v; want the note %q", b.Stderr, b.Kill, want)
	}
	if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0); n != 0 {
		t.Fatal("the daemon died with B: then it was attributed after all")
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := <-ach
	if a.err != nil {
		t.Fatal(a.err)
	}
	if !strings.Contains(a.res.Stderr, "also killed 1 process that this command or one that ran beside it and has ended left behind") {
		t.Errorf("A's Result does not say it killed the stray: %q", a.res.Stderr)
	}
	checkPidfileDead(t, pidfile)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
