package supervisor

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/spill"
)

// Timeout bounds. A request's timeout must lie in [MinTimeout, the
// supervisor's MaxTimeout]; an embedding harness may raise MaxTimeout up to
// CeilingTimeout in Config, a request never can.
const (
	DefaultTimeout = 60 * time.Second
	MinTimeout     = 1 * time.Second
	MaxTimeout     = 300 * time.Second
	CeilingTimeout = 21600 * time.Second
)

// ErrInvalidRequest matches every validation error (a *RequestError); it is
// INVALID_ARGUMENT on the wire. Nothing was started when Run returns it.
var ErrInvalidRequest = errors.New("supervisor: invalid request")

// RequestError is a request that failed validation. Reason is the message
// without the package prefix, as wire errors carry it ("timeout must be
// between 1 and 300 seconds, got 301"). It matches ErrInvalidRequest, and
// Kind when set; Err, when set, is the underlying error (syscall.E2BIG for
// a command too large to exec), reached by errors.Is and errors.As.
type RequestError struct {
	Reason string
	Kind   error
	Err    error
}

func (e *RequestError) Error() string { return "supervisor: invalid request: " + e.Reason }

// Unwrap returns Err.
func (e *RequestError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalidRequest or e.Kind.
func (e *RequestError) Is(target error) bool {
	return target == ErrInvalidRequest || e.Kind != nil && target == e.Kind
}

// invalid returns a *RequestError with a formatted reason.
func invalid(format string, args ...any) error {
	return &RequestError{Reason: fmt.Sprintf(format, args...)}
}

// Request is one command to run. The zero value of every optional field
// takes the documented default.
type Request struct {
	// Command is run as `<shell> -c Command`. Required unless Argv is
	// set; no NUL bytes.
	Command string
	// Argv, when set, runs the program Argv[0] with the arguments Argv[1:]
	// in place of the shell, as exec does: no `<shell> -c`, so the program
	// is the tree's leader and its pid the one reported. A name without a
	// slash is looked up in the PATH of the command's environment. Command
	// is then only what the command is listed, logged and journaled as ("":
	// the words of Argv, shell-quoted). A named session's state applies to
	// its start (its working directory unless Dir is set, its variables
	// beneath Env), but the program is not the shell that would report its
	// end state, so it saves none.
	Argv []string
	// Dir is the working directory; "" is the supervisor's own (see
	// Config.User for commands run as another user). It must exist.
	Dir string
	// Env overrides variables of the inherited environment (and of the
	// prompt-suppression defaults). Names are non-empty, without '=' or NUL.
	Env map[string]string
	// Unset removes inherited variables.
	Unset []string
	// Stdin, when non-nil, is written to the command's stdin, which is then
	// closed. nil means /dev/null, so `cat` or `read x` return at once.
	Stdin []byte
	// Timeout is the wall-clock limit; 0 means DefaultTimeout. Any other value
	// must lie in [MinTimeout, the supervisor's MaxTimeout]. Wire layers that
	// receive seconds use ParseTimeout, which also rejects 0, NaN and infinities.
	Timeout time.Duration
	// Session and Label name spill files (spill.ValidateName rules); ""
	// means "default" and "bash". A named session other than "default"
	// also carries state from one command to the next (see Config.NoSessionState):
	// the command starts in the working directory, with the exported
	// variables, that the session's last command which exited by itself
	// ended with; Dir and Env apply on top.
	Session, Label string
	// ResetSession clears the session's state before the command runs.
	ResetSession bool
	// Owner names the client a job belongs to (a StartJob job, or the job
	// a yielding command becomes); "" is nobody in particular. The
	// supervisor only records it (Jobs.Owner, Jobs.Owned): a front end that
	// serves several clients uses it to keep one client's jobs from
	// another.
	Owner string
	// Yield, when positive, hands the command over as a background job if
	// it still runs after that long: Run then returns a Result with Running
	// set, the job's ID and the model views of what it printed so far, and
	// the command goes on in the same tree under the same timeout; its final
	// Result comes from the job API and covers all its output. It must not
	// exceed the timeout, and needs a free job slot (ErrTooManyJobs).
	Yield time.Duration
	// User runs the command as this user (a login name or a numeric user
	// ID) in place of Config.User: its IDs and groups, and its HOME, USER
	// and LOGNAME; a request without Dir starts in its home. "" and the
	// user commands run as anyway change nothing. Another user needs a
	// supervisor running as root; when Config.User is set it is never root
	// (a supervisor told to run commands unprivileged stays so) and must be
	// one of Config.AllowUsers.
	User string
	// TTY, when set, runs the command on a new pseudo-terminal of that size
	// (a zero side takes DefaultTTYCols or DefaultTTYRows): the shell leads
	// a new session with the terminal as its controlling terminal, stdin,
	// stdout and stderr (docs/terminals.md). The Result's stdout is the
	// terminal's output (tail policy unless StdoutPolicy says otherwise),
	// its stderr only corral's notes; TERM is xterm-256color and the
	// prompt-suppression variables are not set. It cannot be combined with
	// Stdin: a command's terminal takes input once it yielded, as a job's
	// (JobInput). Not on Windows.
	TTY *TTYSize
	// Limits caps the command's memory, CPU and tasks; zero fields take
	// the supervisor's defaults, which are also the most a request may ask.
	Limits Limits
	// StdoutPolicy and StderrPolicy choose which end of a stream the model
	// sees; "" means head for stdout and tail for stderr.
	StdoutPolicy, StderrPolicy budget.Policy
	// JoinStderr makes the command's stderr its stdout pipe, as 2>&1
	// would: one stream in the order written, and a Result whose stderr
	// holds only corral's notes. A terminal has one stream anyway.
	JoinStderr bool
	// OnEvent, when non-nil, receives the live events in order, from one
	// goroutine at a time, the result event last. It may be slow: events
	// then coalesce, and past the live cap a stream ends with one capped
	// event; the drain never waits for it. Run returns only after OnEvent
	// returned from the result event, so a callback that never returns
	// keeps Run from returning.
	OnEvent func(Event)
}

// ParseTimeout turns a wire timeout in seconds into a Duration, rejecting
// zero, negative, NaN and infinite values and anything above max (0 means
// MaxTimeout).
func ParseTimeout(seconds float64, max time.Duration) (time.Duration, error) {
	if max <= 0 {
		max = MaxTimeout
	}
	return checkTimeout("timeout", seconds, max)
}

// checkTimeout is the one check of a timeout's range (and a job's
// lifetime's): seconds must lie in [MinTimeout, max]; NaN and the
// infinities never do. what names the value in the error.
func checkTimeout(what string, seconds float64, max time.Duration) (time.Duration, error) {
	if seconds > max.Seconds() && seconds >= 1000 && math.Mod(seconds, 1000) == 0 {
		// Harnesses that speak milliseconds (Claude Code's Bash) send 120000.
		return 0, invalid("%s is in seconds, not milliseconds: %v seconds is over the %g allowed; for %g s send %g",
			what, seconds, max.Seconds(), seconds/1000, seconds/1000)
	}
	return ParseSeconds(what, seconds, MinTimeout, max)
}

// ParseSeconds is the one parser of a wire duration in seconds (a timeout,
// a yield, a wait, a lifetime, a grace): seconds must lie in [lo, hi]; NaN
// and the infinities never do. what names the value in the error, a
// *RequestError (ErrInvalidRequest) that every face answers as bad input.
func ParseSeconds(what string, seconds float64, lo, hi time.Duration) (time.Duration, error) {
	if math.IsNaN(seconds) || seconds < lo.Seconds() || seconds > hi.Seconds() {
		return 0, invalid("%s must be between %g and %g seconds, got %v",
			what, lo.Seconds(), hi.Seconds(), seconds)
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

// validated is a Request after validation, with every default applied.
type validated struct {
	Request
	user    *runAs   // whom the command runs as; nil: this process's user
	tty     *TTYSize // the terminal's size, checked; nil for pipes
	timeout time.Duration
	stdout  budget.Policy
	stderr  budget.Policy

	// entry is a batch request's journal entry, written as started before
	// the batch ran; nil makes the command write its own.
	entry *journal.Started

	// Set for background jobs only.
	job         bool
	interactive bool   // stdin stays an open pipe for Jobs.Input
	notify      func() // called after every chunk drained, from the drain goroutines
	grew        func() // called after a chunk made a stream's buffers grow, from the drain goroutines
}

// validate checks r against the supervisor's limits and fills defaults, in
// steps: the command, its timing, whom it runs as and where, its
// environment, its limits, its names, its output. It touches nothing but a
// stat of Dir.
func (s *Supervisor) validate(r Request) (validated, error) {
	v := validated{Request: r}
	for _, step := range []func(*validated) error{
		checkCommand, s.checkTiming, s.checkPlace, checkEnv,
		s.checkRequestLimits, checkNames, checkOutput, s.checkEmulator,
	} {
		if err := step(&v); err != nil {
			return validated{}, err
		}
	}
	return v, nil
}

// checkCommand checks the command line or the argv (quoted into Command
// when Command is empty).
func checkCommand(v *validated) error {
	if v.Argv != nil {
		if len(v.Argv) == 0 || v.Argv[0] == "" {
			return invalid("argv: the program name (argv[0]) is empty")
		}
		for i, a := range v.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				return invalid("argv[%d] contains a NUL byte", i)
			}
		}
		if strings.TrimSpace(v.Command) == "" {
			v.Command = quoteWords(v.Argv)
		}
	} else if strings.TrimSpace(v.Command) == "" {
		return invalid("command is empty")
	}
	if strings.IndexByte(v.Command, 0) >= 0 {
		return invalid("command contains a NUL byte")
	}
	return nil
}

// checkTiming sets the timeout (DefaultTimeout for 0) and checks the yield
// against it.
func (s *Supervisor) checkTiming(v *validated) error {
	v.timeout = DefaultTimeout
	if v.Timeout != 0 {
		if _, err := checkTimeout("timeout", v.Timeout.Seconds(), s.maxTimeout); err != nil {
			return err
		}
		v.timeout = v.Timeout
	}
	if v.Yield < 0 || v.Yield > v.timeout {
		return invalid("yield must be between 0 and the timeout (%g seconds), got %g",
			v.timeout.Seconds(), v.Yield.Seconds())
	}
	return nil
}

// checkPlace resolves whom the command runs as and checks that its Dir is
// a directory that user may enter.
func (s *Supervisor) checkPlace(v *validated) error {
	v.user = s.user
	if v.User != "" {
		u, err := s.requestUser(v.User)
		if err != nil {
			return invalid("%v", err)
		}
		v.user = u
	}
	if v.Dir == "" {
		return nil
	}
	fi, err := os.Stat(v.Dir)
	switch {
	case err != nil:
		return invalid("cwd %q: %v", v.Dir, errors.Unwrap(err))
	case !fi.IsDir():
		return invalid("cwd %q is not a directory", v.Dir)
	case v.user != nil && !v.user.canEnter(v.Dir):
		return invalid("cwd %q: user %s may not enter it", v.Dir, v.user.name)
	}
	return nil
}

// checkEnv checks the names and values of Env and the names of Unset.
func checkEnv(v *validated) error {
	for k, val := range v.Env {
		if err := checkEnvName(k); err != nil {
			return invalid("env: %v", err)
		}
		if strings.IndexByte(val, 0) >= 0 {
			return invalid("env %s: value contains a NUL byte", k)
		}
	}
	for _, k := range v.Unset {
		if err := checkEnvName(k); err != nil {
			return invalid("unset: %v", err)
		}
	}
	return nil
}

// checkRequestLimits checks the request's limits against the supervisor's
// ceilings.
func (s *Supervisor) checkRequestLimits(v *validated) error {
	if err := s.checkLimits(v.Limits); err != nil {
		return invalid("%s", err)
	}
	return nil
}

// checkNames fills the default session and label and checks both as
// spill directory names.
func checkNames(v *validated) error {
	v.Session = cmp.Or(v.Session, "default")
	v.Label = cmp.Or(v.Label, "bash")
	if spill.ValidateName("session", v.Session) != nil {
		return invalid("session %q %s", v.Session, spill.NameRule)
	}
	if spill.ValidateName("label", v.Label) != nil {
		return invalid("label %q %s", v.Label, spill.NameRule)
	}
	return nil
}

// checkEmulator refuses a terminal to a Supervisor that has no emulator
// to render its screen (Config.Emulator).
func (s *Supervisor) checkEmulator(v *validated) error {
	if v.tty != nil && s.cfg.Emulator == nil {
		return invalid("tty: this supervisor has no terminal emulator (supervisor.Config.Emulator; supervisor/vtemu has corral's)")
	}
	return nil
}

// checkOutput checks the terminal's size (a terminal job is interactive,
// takes no stdin up front and keeps the tail of its one stream by default)
// and the policies of both streams.
func checkOutput(v *validated) error {
	stdoutDefault := budget.PolicyHead
	if v.TTY != nil {
		if v.Stdin != nil {
			return invalid("stdin cannot be combined with tty: a terminal takes input through job input once the command yielded")
		}
		sz, err := v.TTY.check()
		if err != nil {
			return err
		}
		if !canTTY {
			return invalid("%v", errNoTTY)
		}
		v.tty, v.interactive = &sz, true
		stdoutDefault = budget.PolicyTail // the last screenful matters
	}
	var err error
	if v.stdout, err = policyOr(v.StdoutPolicy, stdoutDefault); err != nil {
		return invalid("stdoutPolicy: %s", err)
	}
	if v.stderr, err = policyOr(v.StderrPolicy, budget.PolicyTail); err != nil {
		return invalid("stderrPolicy: %s", err)
	}
	return nil
}

// policyOr returns p, or def when p is empty. Its error is the reason
// alone, for a RequestError.
func policyOr(p, def budget.Policy) (budget.Policy, error) {
	if p == "" {
		return def, nil
	}
	if _, err := budget.ParsePolicy(string(p)); err != nil {
		return "", fmt.Errorf("unknown policy %q; allowed: %q, %q, %q", p, budget.PolicyHead, budget.PolicyTail, budget.PolicyHeadTail)
	}
	return p, nil
}

// quoteWords renders argv as a shell would read it back: each word in
// single quotes, but for words of plain characters.
func quoteWords(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,+@%") == "" {
			words[i] = a
		} else {
			words[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// lookPath finds the program argv[0] names as execvp would with the PATH
// of env (exec.LookPath reads the server's own): a name with a slash is
// taken as it is, relative to dir.
func lookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			return "", invalid("argv[0] %q: %v", name, errors.Unwrap(err))
		case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
			return "", invalid("argv[0] %q is not an executable file", name)
		}
		return name, nil
	}
	path, _ := lookupEnv(env, "PATH")
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", invalid("argv[0] %q: no such program in the command's PATH", name)
}

func checkEnvName(k string) error {
	if k == "" {
		return errors.New("empty variable name")
	}
	if strings.ContainsAny(k, "=\x00") {
		return fmt.Errorf("variable name %q contains '=' or NUL", k)
	}
	return nil
}

// promptSuppression is set in every child's environment unless the request
// overrides a variable or the supervisor was configured without it: no pager,
// no editor, no credential prompt, no interactive package configuration.
var promptSuppression = []string{
	"PAGER=cat",
	"GIT_PAGER=cat",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_EDITOR=true",
	"EDITOR=true",
	"VISUAL=true",
	"DEBIAN_FRONTEND=noninteractive",
}

// promptKeys are the names promptSuppression sets.
var promptKeys = func() map[string]bool {
	m := map[string]bool{}
	for _, kv := range promptSuppression {
		k, _, _ := strings.Cut(kv, "=")
		m[k] = true
	}
	return m
}()

// environ builds the child's environment: the supervisor's own, minus the
// scrubbed names, plus prompt suppression and the run-as user's HOME, USER
// and LOGNAME, plus the request's overrides, minus its removals, plus the
// run marker. Scrubbed names never get through,
// not even when the request sets them. It runs for every command, so it
// filters one pass over the supervisor's environment instead of building a
// map of it.
//
// base is a session's saved environment, nil for the supervisor's own; a
// prompt variable it holds is one the session's commands chose, and stays.
func (s *Supervisor) environ(v validated, runID string, base []string) []string {
	removed := func(k string) bool {
		return slices.Contains(v.Unset, k) || slices.Contains(s.cfg.Scrub, k)
	}
	// A terminal is a conversation the request asked for: no prompt
	// suppression, and a TERM its programs know.
	suppress := !s.cfg.NoPromptSuppression && v.tty == nil
	fromSession := base != nil
	if !fromSession {
		base = os.Environ()
	}
	chosen := map[string]bool{} // prompt and user variables the session chose
	env := make([]string, 0, len(base)+len(promptSuppression)+len(userKeys)+len(v.Env)+1)
	for _, kv := range base {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || k == RunIDEnv {
			continue
		}
		if promptKeys[k] && suppress || userKeys[k] && v.user != nil || k == "TERM" && v.tty != nil {
			if !fromSession {
				continue
			}
			chosen[k] = true
		}
		if _, set := v.Env[k]; set || removed(k) {
			continue
		}
		env = append(env, kv)
	}
	var defaults []string
	if suppress {
		defaults = promptSuppression
	}
	if v.tty != nil {
		defaults = []string{"TERM=" + ttyTerm}
	}
	if v.user != nil {
		defaults = append(v.user.env(), defaults...)
	}
	for _, kv := range defaults {
		k, _, _ := strings.Cut(kv, "=")
		if _, set := v.Env[k]; !set && !removed(k) && !chosen[k] {
			env = append(env, kv)
		}
	}
	// An interactive job talks through pipes: Python would block-buffer its
	// answers until it exits.
	if _, set := v.Env["PYTHONUNBUFFERED"]; v.interactive && v.tty == nil && !set && !removed("PYTHONUNBUFFERED") {
		env = append(env, "PYTHONUNBUFFERED=1")
	}
	for _, k := range slices.Sorted(maps.Keys(v.Env)) {
		if k != RunIDEnv && !removed(k) {
			env = append(env, k+"="+v.Env[k])
		}
	}
	return append(env, RunIDEnv+"="+runID)
}

// RunIDEnv is the variable every command finds its run ID in. It also marks
// the command's processes for diagnostics.
const RunIDEnv = "CORRAL_RUN_ID"
