package supervisor

import (
	"fmt"
	"strings"
	"time"
)

// Face names the interface whose tools a Result's text points to when it
// names what to do next (a yielded command's job).
type Face uint8

const (
	// FaceMCP names the MCP tools job_wait, job_output and job_kill.
	FaceMCP Face = iota
	// FaceHTTP names the HTTP routes /v1/jobs/{id}/wait, /output and
	// DELETE /v1/jobs/{id}.
	FaceHTTP
)

// Text is the Result as a model reads it over MCP (the bash tool's text);
// TextOn(FaceHTTP) is each result of a batch view.
func (r Result) Text() string { return r.TextOn(FaceMCP) }

// TextOn is the Result as a model reads it on face: the stdout view, then
// the stderr view after a "[stderr]" line, then the status line, each
// ending with a newline but the status line.
func (r Result) TextOn(face Face) string {
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
	b.WriteString(r.StatusOn(face))
	return b.String()
}

// Status is StatusOn(FaceMCP).
func (r Result) Status() string { return r.StatusOn(FaceMCP) }

// StatusOn is the one line, in brackets, saying how the command ended: its
// exit code, or how it was stopped, how long it ran, what was killed and
// the session's working directory; for a journaled Result completed after
// a restart, that it was interrupted; "[did not start]" for a Result with
// neither exit code nor signal that is not running (its stderr says why).
// A yielded command's line names what to do next with the tools of face.
func (r Result) StatusOn(face Face) string {
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
	case r.Running && r.Waiting != nil && face == FaceHTTP:
		return fmt.Sprintf("[%s; it goes on as background job %s: answer with POST /v1/jobs/%s/stdin, "+
			"or stop it with DELETE /v1/jobs/%s]", r.Waiting.Describe(), r.JobID, r.JobID, r.JobID)
	case r.Running && r.Waiting != nil:
		return fmt.Sprintf("[%s; it goes on as background job %s: answer with job_input {\"id\": %q, \"data\": \"...\"}, or stop it with job_kill]",
			r.Waiting.Describe(), r.JobID, r.JobID)
	case r.Running && face == FaceHTTP:
		return fmt.Sprintf("[still running after %s as background job %s: wait for its end with POST /v1/jobs/%s/wait, "+
			"read what it prints next with GET /v1/jobs/%s/output, or stop it with DELETE /v1/jobs/%s]", d, r.JobID, r.JobID, r.JobID, r.JobID)
	case r.Running:
		return fmt.Sprintf("[still running after %s as background job %s: wait for its end with job_wait {\"id\": %q}, "+
			"read what it prints next with job_output {\"id\": %q}, or stop it with job_kill]", d, r.JobID, r.JobID, r.JobID)
	case r.TimedOut:
		return fmt.Sprintf("[timed out after %s: stopped with %s%s%s]", d, r.Signal, killed, cwd)
	case r.Aborted:
		return fmt.Sprintf("[aborted after %s: stopped with %s%s%s]", d, r.Signal, killed, cwd)
	case r.ExitCode == nil:
		return fmt.Sprintf("[killed by %s after %s%s%s]", r.Signal, d, killed, cwd)
	}
	return fmt.Sprintf("[exit code %d after %s%s%s]", *r.ExitCode, d, killed, cwd)
}
