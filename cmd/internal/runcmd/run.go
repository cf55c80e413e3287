package runcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/cmd/internal/cli"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/spill"
	"github.com/corral-sh/corral/supervisor"
)

const runUsage = `Usage: corral run [flags] -- 'COMMAND LINE'
       corral run [flags] -- PROGRAM [ARG...]

Runs a command with bash -c (sh where bash is absent) inside a containment
that is killed completely when the command ends, times out or is
interrupted. One argument is a shell command line, run as written (pipes,
redirections, globs). Several are a program and its arguments, passed as
they are: each is quoted for the shell, so "dir with space" stays one
argument and * is not expanded. stdin is empty unless --stdin names a file
(- for corral's own stdin), which is read whole and fed to the command.
stdout and stderr stream live to this terminal (each capped at 512 KiB);
then a one-line summary on stderr says how it ended and what the model view
kept. The exit code is the command's, 124 on timeout, 128+N when killed by
signal N, 130 when interrupted.

With --tty the command runs on a terminal of this terminal's size (120x40
when stdout is not one): what you type goes to it (this terminal is put in
raw mode while it runs, so Ctrl-C reaches the command), a resize of this
terminal resizes it, and its output streams here as it comes. See
docs/terminals.md.

With --json nothing streams: the Result JSON is printed on stdout and corral
exits 0 whatever the command's exit code; an invalid request prints the
error JSON and exits 2.

Flags:
`

// runFlags are the flags of corral run.
type runFlags struct {
	timeout      float64
	cwd          string
	session      string
	label        string
	dataDir      string
	stdoutPolicy string
	stderrPolicy string
	grace        float64
	containment  string
	runAs        string
	stdin        string
	json         bool
	tty          bool
	limits       cli.Limits
}

func (m *Main) runFlagSet(f *runFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("corral run", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		fs.PrintDefaults()
	}
	fs.Float64Var(&f.timeout, "timeout", supervisor.DefaultTimeout.Seconds(), "timeout in `seconds`, 1 to 300")
	fs.StringVar(&f.cwd, "cwd", "", "working `directory` (default the current one)")
	fs.StringVar(&f.session, "session", "default", "session `ID` that names the spill directory ([A-Za-z0-9._-], 1-128); corral run is stateless: each invocation is its own process, so no working directory or variable carries over (use the server or MCP for sessions)")
	fs.StringVar(&f.label, "label", "bash", "`label` that starts spill file names ([A-Za-z0-9._-], 1-128)")
	fs.StringVar(&f.dataDir, "data-dir", cli.DataDir(m.Getenv), "`directory` for spill files (default $CORRAL_DATA_DIR, else the XDG data directory + /corral)")
	fs.StringVar(&f.stdoutPolicy, "stdout-policy", "head", "which part of stdout the model sees: head, tail or head+tail")
	fs.StringVar(&f.stderrPolicy, "stderr-policy", "tail", "which part of stderr the model sees: head, tail or head+tail")
	fs.Float64Var(&f.grace, "grace", supervisor.DefaultGrace.Seconds(), "`seconds` between SIGTERM and SIGKILL on the way down (0: SIGKILL at once)")
	fs.StringVar(&f.containment, "containment", m.Getenv("CORRAL_CONTAINMENT"), "force a containment `tier`: cgroup2, cgroup1 or pgroup (default: the strongest that works; $CORRAL_CONTAINMENT)")
	fs.StringVar(&f.runAs, "run-as", "", "run the command as this unprivileged `user` (name or uid; needs root)")
	fs.StringVar(&f.stdin, "stdin", "", "feed the command's stdin from `file` (- for corral's stdin; default empty)")
	fs.BoolVar(&f.json, "json", false, "print the Result JSON instead of streaming")
	fs.BoolVar(&f.tty, "tty", false, "run the command on a terminal of this terminal's size; what you type goes to it (docs/terminals.md)")
	f.limits.Register(fs)
	return fs
}

// Main is corral run with its streams, environment and platform injected.
type Main struct {
	Stdin          io.Reader // read by --stdin -
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Interrupts, when set, is closed once SIGINT and SIGTERM cancel the
	// context Run is given: the command starts only after.
	Interrupts <-chan struct{}
	// Emulator is the terminal emulator of a --tty run
	// (supervisor.Config.Emulator). Without one, a --tty run is handed to
	// Elsewhere whole, before anything starts.
	Emulator  func(cols, rows int) supervisor.Emulator
	Elsewhere func(args []string) error
}

// Run runs corral run with args (the flags and the command, without
// "run"). Its error is the exit code and message cli.Exit prints (ErrText).
func (m *Main) Run(ctx context.Context, args []string) error {
	var f runFlags
	fs := m.runFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if f.tty && m.Emulator == nil {
		if m.Elsewhere == nil {
			return m.invalid(f.json, &supervisor.RequestError{Reason: "--tty needs a terminal emulator, which this program does not have"})
		}
		return m.Elsewhere(args)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	command := commandLine(fs.Args())

	req, err := m.request(f, set, command)
	if err != nil {
		return m.invalid(f.json, err)
	}
	if req.Stdin, err = m.readStdin(f.stdin); err != nil {
		return m.invalid(f.json, err)
	}
	grace, err := cli.Grace(f.grace)
	if err != nil {
		return m.invalid(f.json, err)
	}
	// The tier detection of this boot is cached in the data directory:
	// a corral run per command must not pay its self-test children.
	containment := killtree.Config{Tier: killtree.Tier(f.containment), SoleTree: true, TierCache: cli.TierCache(f.dataDir)}
	if err := f.limits.Apply(&containment); err != nil {
		return m.invalid(f.json, &supervisor.RequestError{Reason: err.Error()})
	}
	sup, err := supervisor.New(supervisor.Config{
		Emulator: m.Emulator,
		DataDir:  f.dataDir,
		Grace:    grace,
		User:     f.runAs,
		// One command per process: no state to carry to a next one.
		NoSessionState: true,
		// One command, one tree, no other children: every orphan that
		// reaches this process is the command's (killtree.Config.SoleTree).
		Containment: containment,
	})
	if errors.Is(err, supervisor.ErrInvalidRequest) {
		return m.invalid(f.json, err) // a limit flag out of bounds
	}
	if err != nil {
		return err
	}
	defer sup.Close()

	if !f.json {
		req.OnEvent = m.stream
	}
	if m.Interrupts != nil {
		<-m.Interrupts // an interrupt from now on is one the command's Result tells
	}
	var res supervisor.Result
	if f.tty {
		if f.stdin != "" {
			return m.invalid(f.json, &supervisor.RequestError{Reason: "--stdin cannot be combined with --tty: type into the terminal"})
		}
		req.TTY = m.terminalSize()
		res, err = m.runTTY(ctx, sup, req)
	} else {
		res, err = sup.Run(ctx, req)
	}
	if err != nil {
		return m.invalid(f.json, err)
	}
	if f.json {
		return newEncoder(m.Stdout).Encode(res)
	}
	fmt.Fprintln(m.Stderr, summary(res))
	return exitError{Code: exitCode(res)}
}

// request builds the supervisor request from the flags, validating what the
// supervisor cannot (the timeout's wire form, the policies' spelling).
func (m *Main) request(f runFlags, set map[string]bool, command string) (supervisor.Request, error) {
	req := supervisor.Request{
		Command:      command,
		Dir:          f.cwd,
		Session:      f.session,
		Label:        f.label,
		StdoutPolicy: budget.Policy(f.stdoutPolicy),
		StderrPolicy: budget.Policy(f.stderrPolicy),
	}
	if command == "" {
		return req, &supervisor.RequestError{Reason: "no command given (corral run -- COMMAND)"}
	}
	if set["timeout"] {
		d, err := supervisor.ParseTimeout(f.timeout, 0)
		if err != nil {
			return req, err
		}
		req.Timeout = d
	}
	return req, nil
}

// commandLine is the shell command line for the arguments after the flags:
// one argument is a command line as written; several are a program and its
// arguments, each quoted for the shell so that it arrives as one argument,
// byte for byte.
func commandLine(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes s for bash: as it is when every byte is one the shell
// never treats specially, else in single quotes, where a quote inside is
// written as close-quote, backslash-quote, reopen-quote.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+/.,:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// readStdin reads the --stdin source whole: "" is none (the command's stdin
// is /dev/null), "-" is corral's own stdin, anything else a file.
func (m *Main) readStdin(name string) ([]byte, error) {
	switch name {
	case "":
		return nil, nil
	case "-":
		b, err := io.ReadAll(m.Stdin)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, &supervisor.RequestError{Reason: fmt.Sprintf("--stdin: %v", err)}
	}
	return b, nil
}

// invalid reports a request the supervisor refused: the error JSON on
// stdout with --json, a message on stderr otherwise; exit code 2.
func (m *Main) invalid(asJSON bool, err error) error {
	if !invalidRequest(err) {
		return err
	}
	if asJSON {
		newEncoder(m.Stdout).Encode(newErrorBody(err))
	} else {
		fmt.Fprintln(m.Stderr, "corral:", ErrText(err))
	}
	return exitError{Code: 2}
}

// stream writes live output to the terminal as it arrives.
func (m *Main) stream(ev supervisor.Event) {
	switch ev.Event {
	case supervisor.EventOutput:
		io.WriteString(m.writer(ev.Stream), ev.Data)
	case supervisor.EventCapped:
		fmt.Fprintf(m.Stderr, "\n[corral: live %s capped at %d KiB; the summary says what was kept]\n", ev.Stream, supervisor.DefaultLiveCap>>10)
	}
}

func (m *Main) writer(stream supervisor.Stream) io.Writer {
	if stream == supervisor.Stderr {
		return m.Stderr
	}
	return m.Stdout
}

// exitCode is the command's code, 124 on timeout, 128+N for signal N, 130
// when interrupted.
func exitCode(res supervisor.Result) int {
	switch {
	case res.TimedOut:
		return 124
	case res.Aborted:
		return 130
	case res.ExitCode != nil:
		return *res.ExitCode
	}
	return 128 + signalNumber(res.Signal)
}

// summary is the one line printed after the live output.
func summary(res supervisor.Result) string {
	var b strings.Builder
	b.WriteString("corral: ")
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "timed out (%s)", res.Signal)
	case res.Aborted:
		fmt.Fprintf(&b, "interrupted (%s)", res.Signal)
	case res.ExitCode != nil:
		fmt.Fprintf(&b, "exit %d", *res.ExitCode)
	default:
		fmt.Fprintf(&b, "killed by %s", res.Signal)
	}
	fmt.Fprintf(&b, " in %s", (time.Duration(res.DurationMs) * time.Millisecond).String())
	if k := res.Kill; k.Processes > 0 {
		fmt.Fprintf(&b, "; killed %s (%d lingering, %d escaped) [%s]", plural(k.Processes, "process", "processes"), k.Lingering, k.Escapees, k.Tier)
	}
	for _, s := range []struct {
		name string
		info budget.Info
	}{{"stdout", res.StdoutInfo}, {"stderr", res.StderrInfo}} {
		if !s.info.Truncated {
			continue
		}
		fmt.Fprintf(&b, "; %s cut: the model sees %d of %d lines (%d of %d bytes)",
			s.name, s.info.KeptLines, s.info.TotalLines, s.info.KeptBytes, s.info.TotalBytes)
		if s.info.SpillPath != "" {
			fmt.Fprintf(&b, ", fuller copy in %s", s.info.SpillPath)
		}
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// newEncoder is a JSON encoder that does not escape HTML, as the wire
// faces encode (api.NewEncoder).
func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// errUsage marks a command-line mistake; it exits 2.
var errUsage = cli.ErrUsage

// exitError carries an exit code out of Run.
type exitError = cli.ExitError

// ErrText is err as the CLI prints it: the message every wire face gives
// (supervisor.Reason, as api.Message for the errors corral run meets),
// without the Go package prefixes that error texts keep for logs.
func ErrText(err error) string { return cli.Plain(supervisor.Reason(err)) }

// invalidRequest reports whether err is one the wire faces call
// INVALID_ARGUMENT (api.Code), among the errors corral run meets.
func invalidRequest(err error) bool {
	return errors.Is(err, supervisor.ErrInvalidRequest) || errors.Is(err, spill.ErrInvalidName) ||
		errors.Is(err, budget.ErrInvalid) || errors.Is(err, journal.ErrInvalidSession)
}

// errorBody is the error JSON of the wire faces (api.ErrorBody) for an
// invalid request.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func newErrorBody(err error) errorBody {
	var b errorBody
	b.Error.Code, b.Error.Message = "INVALID_ARGUMENT", supervisor.Reason(err)
	return b
}
