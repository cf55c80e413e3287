package supervisor

import (
	"fmt"
	"strings"
	"time"
)

// Text is the Result as a model reads it (the MCP bash tool's text, and
// each result of a batch view): the stdout view, then the stderr view after
// a "[stderr]" line, then the status line, each ending with a newline but
// the status line.
func (r Result) Text() string {
	var b strings.Builder
	line := func(s string) {
		if s == "" {
			return
		}
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteByte('\n')
		}
	}
	line(r.Stdout)
	if r.Stderr != "" {
		b.WriteString("[stderr]\n")
		line(r.Stderr)
	}
	b.WriteString(r.Status())
	return b.String()
}

// Status is the one line, in brackets, saying how the command ended: its
// exit code, or how it was stopped, how long it ran, what was killed and
// the session's working directory; for a journaled Result completed after
// a restart, that it was interrupted; "[did not start]" for a Result with
// neither exit code nor signal that is not running (its stderr says why).
func (r Result) Status() string {
	d := (time.Duration(r.DurationMs) * time.Millisecond).String()
	killed := ""
	if n := r.Kill.Processes; n > 0 {
		killed = fmt.Sprintf("; %d process(es) killed", n)
		if r.Kill.Lingering > 0 {
			killed += fmt.Sprintf(", %d left running by the shell", r.Kill.Lingering)
		}
	}
	cwd := ""
	if r.Cwd != "" {
		cwd = "; cwd " + r.Cwd
	}
	switch {
	case r.Interrupted:
		return "[interrupted: the server stopped before the result was recorded]"
	case r.ExitCode == nil && r.Signal == "" && !r.Running:
		return "[did not start]"
	case r.Running && r.Waiting != nil:
		return fmt.Sprintf("[%s; it goes on as background job %s: answer with job_input {\"id\": %q, \"data\": \"...\"}, or stop it with job_kill]",
			r.Waiting.Describe(), r.JobID, r.JobID)
	case r.Running:
		return fmt.Sprintf("[still running after %s as background job %s: read what it prints next with job_output {\"id\": %q}, or stop it with job_kill]",
			d, r.JobID, r.JobID)
	case r.TimedOut:
		return fmt.Sprintf("[timed out after %s: stopped with %s%s%s]", d, r.Signal, killed, cwd)
	case r.Aborted:
		return fmt.Sprintf("[aborted after %s: stopped with %s%s%s]", d, r.Signal, killed, cwd)
	case r.ExitCode == nil:
		return fmt.Sprintf("[killed by %s after %s%s%s]", r.Signal, d, killed, cwd)
	}
	return fmt.Sprintf("[exit code %d after %s%s%s]", *r.ExitCode, d, killed, cwd)
}
