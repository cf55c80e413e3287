// Package supervisor runs one shell command to the end and returns what the
// model should see. It is the entry point an embedding harness uses.
//
// Run validates a Request before anything starts (a bad timeout, an empty
// command or a NUL byte is ErrInvalidRequest and nothing runs; so is a
// command the kernel refuses to exec for its size, E2BIG), starts the
// shell inside a fresh killtree containment with stdin on /dev/null (or the
// request's bytes), drains stdout and stderr concurrently into the capture
// layer without ever blocking the child, and delivers live events to the
// request's callback without letting a slow callback slow the drain. On
// Linux the goroutine that called Run drains a short command itself, with
// one ppoll over both pipes and a pidfd of the shell, so that the shell's
// exit wakes that one thread; a command that proves busy, and whatever the
// shell left holding a pipe, is drained by goroutines in the runtime's
// poller (pump_linux.go says why). Elsewhere goroutines drain from the start.
//
// The way down is the same for a timeout, an aborted context and processes
// left behind by a shell that exited (after a short settle): SIGTERM to every
// member, a grace period that ends early once the tree is empty, SIGKILL to
// the whole tree, confirmation that it is empty, both pipes drained to EOF
// (a pipe-holder scan kills any writer that escaped the containment), and only
// then the Result. No event is delivered after the result event. An abort
// whose cause is ErrClientGone skips SIGTERM and the grace.
//
// With Config.User set (the process must be root), every command runs as
// that unprivileged user: its IDs and groups are set in the child before
// exec, so the command cannot write the containment's cgroup files, signal
// the supervisor or read its spill files and memory; the containments, the spill
// files and the data directory stay the supervisor's. Request.User picks
// the user of one command the same way (root only; never root itself when
// Config.User is set). Request.Argv runs a program without the shell, as
// exec does, in the same containment and on the same way down.
//
// A request that names a session carries the working directory and the
// exported variables its last command ended with to the next one (a fresh
// shell each time: the state is replayed). The shell reports its final
// state on descriptor 3 from an EXIT trap (shellstate.go, statechan.go);
// a command whose text cannot change that state is not asked to, and the
// state it started with is saved instead (staticcmd.go).
//
// With a journal (Config.Journal) every command is recorded as started
// before anything of it runs, and its Result before Run returns. A bash
// command does not wait for the first commit: the shell starts beside it
// and holds at a gate in its start-up script until the entry is committed
// (journalgate.go).
//
// RunBatch runs up to 32 requests, a bounded number at once, after
// validating all of them (one invalid request starts nothing), and renders
// their Results as one model-facing text bounded by a byte budget: the
// tail kept under a marker when it is too long (budget.BatchView). With a
// journal, the batch and each of its Results are journaled.
//
// A Request with TTY runs on a pseudo-terminal (creack/pty): the shell
// leads a new session with the slave as its controlling terminal, the
// master is the one output stream and the job's input, and a screen
// (charmbracelet/x/vt, fed lazily) renders it (tty.go, screen.go). Interactive
// and terminal jobs are watched for waiting: after 10 ms of quiet output the
// job's own tree is scanned for a thread blocked reading the job's input
// (/proc/PID/syscall and the descriptor's target, waitprobe_linux.go), and a
// read seen twice with no input between is a wait (waiting.go); a yield
// returns at it. docs/terminals.md states the rules and the boundaries.
//
// The Result marshals to the JSON contract of docs/wire.md: the model
// views of both streams (budget), their counters, the spill paths of the
// fuller copies (spill), and what the kill did (killtree).
package supervisor
