package supervisor

import (
	"fmt"
	"strings"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/killtree"
)

// Result is what one command produced, shaped for the model. It marshals to
// docs/wire.md's Result JSON; field names are a public contract.
type Result struct {
	// ID names the Result's journal entry ("r-…"; GET
	// /v1/sessions/{session}/results/{id}); "" when no journal is
	// configured or the entry could not be written.
	ID         string      `json:"id,omitempty"`
	Stdout     string      `json:"stdout"`
	Stderr     string      `json:"stderr"`
	ExitCode   *int        `json:"exitCode"` // nil when the shell did not exit by itself
	Signal     string      `json:"signal"`   // the signal that ended it when ExitCode is nil
	TimedOut   bool        `json:"timedOut"`
	Aborted    bool        `json:"aborted"`
	DurationMs int64       `json:"durationMs"`
	Truncated  bool        `json:"truncated"` // either stream was cut
	StdoutInfo budget.Info `json:"stdoutInfo"`
	StderrInfo budget.Info `json:"stderrInfo"`
	Kill       KillInfo    `json:"kill"`
	// Cwd is the working directory the session's next command starts in,
	// when the command carried session state; "" otherwise.
	Cwd string `json:"cwd,omitempty"`
	// Running is set when the command was still running at its yield and
	// goes on as the background job JobID; the views then hold what it
	// printed so far, and ExitCode is nil with Signal empty.
	Running bool   `json:"running,omitempty"`
	JobID   string `json:"jobId,omitempty"`
	// Waiting is set on a Running result handed over because the command
	// waits for input (docs/terminals.md), and on the Result of a command
	// that was still waiting for input when its timeout passed.
	Waiting *Waiting `json:"waiting,omitempty"`
	// Limit names the limit the command ran into: "memory" (an OOM kill in
	// its containment) or "pids" (a fork refused at its pids limit); ""
	// when none. The stderr note then says it in words.
	Limit string `json:"limit,omitempty"`
	// Usage is what the whole tree used (see Usage for the sources); nil
	// only in a Running result.
	Usage *Usage `json:"usage,omitempty"`
	// LimitsNotEnforced lists the limits that applied to the command but
	// that its tier does not enforce here ("memory", "cpus", "pids"); the
	// command ran without them.
	LimitsNotEnforced []string `json:"limitsNotEnforced,omitempty"`
	// Interrupted is set on a journaled Result that corral completed at
	// its next start because it stopped (was killed, lost power) while the
	// command ran; Aborted is then set too and the stderr note says so.
	Interrupted bool `json:"interrupted,omitempty"`
}

// KillInfo says what the way down did.
type KillInfo struct {
	// Tier is the containment the command ran in.
	Tier string `json:"tier"`
	// Processes counts the processes killed after the shell exited or was
	// stopped (escapees included).
	Processes int `json:"processes"`
	// Lingering counts the processes the shell left running behind it
	// (also those that left the containment).
	Lingering int `json:"lingering"`
	// Escapees counts the processes (not events: each once) found outside
	// the containment, by the kill's sweep or the pipe-holder scan, and
	// killed.
	Escapees int `json:"escapees,omitempty"`
	// Survivors counts the processes of the tree still alive when the
	// Result was made (in uninterruptible sleep, or frozen where corral may
	// not thaw them); the stderr note then names them and does not say the
	// tree was killed.
	Survivors int `json:"survivors,omitempty"`
	// PipesForced is set when stdout or stderr never reached EOF after the
	// kill and the pipe-holder scan: a writer corral could neither find nor
	// kill still held a write end, so corral stopped reading (as os/exec's
	// WaitDelay does). Output written after that point is missing from the
	// Result, and the counts cover only what was read.
	PipesForced bool `json:"pipesForced,omitempty"`
}

// ending says why the command stopped.
type ending int

const (
	endExited ending = iota
	endTimedOut
	endAborted
)

// note is the line appended to the stderr view when corral stopped the
// command, telling the model what happened and what it can do.
func (s *Supervisor) note(end ending, v validated, kill KillInfo, alive []killtree.Process) string {
	tree := fmt.Sprintf("killed its process tree (%s)", plural(kill.Processes, "process", "processes"))
	if kill.Survivors > 0 {
		tree = fmt.Sprintf("killed %s of its process tree, but %s still alive: %s",
			plural(kill.Processes, "process", "processes"),
			pick(kill.Survivors == 1, "1 process is", fmt.Sprintf("%d processes are", kill.Survivors)),
			names(alive))
	}
	timeout := v.timeout
	switch {
	case end == endTimedOut && v.job:
		return fmt.Sprintf("[corral: the background job reached its lifetime of %s; %s. "+
			"Start it with a longer lifetime (at most %s) if it must run longer.]",
			seconds(timeout), tree, seconds(s.maxLifetime))
	case end == endAborted && v.job:
		return fmt.Sprintf("[corral: the background job was killed; %s.]", tree)
	}
	switch end {
	case endTimedOut:
		msg := fmt.Sprintf("[corral: timed out after %s; %s. The output above is what it printed before that. "+
			"If it needs more time, re-run it with a longer timeout (at most %s)",
			seconds(timeout), tree, seconds(s.maxTimeout))
		if s.cfg.TimeoutHint != "" {
			msg += " " + strings.TrimSpace(s.cfg.TimeoutHint)
		}
		return msg + ".]"
	case endAborted:
		return fmt.Sprintf("[corral: aborted by the caller; %s.]", tree)
	}
	if kill.Survivors > 0 {
		left := max(kill.Lingering, kill.Survivors)
		return fmt.Sprintf("[corral: the shell exited and left %s running; corral could not kill %s, still alive: %s.]",
			plural(left, "process", "processes"),
			pick(kill.Survivors == left, pick(left == 1, "it", "them"), fmt.Sprintf("%d of them", kill.Survivors)),
			names(alive))
	}
	if kill.Lingering > 0 {
		return fmt.Sprintf("[corral: the shell exited and left %s running; %s killed. "+
			"A command's background processes do not outlive it.]",
			plural(kill.Lingering, "process", "processes"), pick(kill.Lingering == 1, "it was", "they were"))
	}
	return ""
}

// strayNote says what the way down did about processes no rule could tie
// to one command (killtree.Config.OwnProcess): strays it killed, left by
// this command or by one that ran beside it and has ended; and the
// processes it left, born while this command and another still running
// one lived.
func strayNote(strays int, left []killtree.Process) string {
	var parts []string
	if strays > 0 {
		parts = append(parts, fmt.Sprintf("[corral: also killed %s that this command or one that ran beside it "+
			"and has ended left behind; they were born while both ran, so corral cannot tell whose they were.]",
			plural(strays, "process", "processes")))
	}
	if len(left) > 0 {
		parts = append(parts, fmt.Sprintf("[corral: %s born while this command and another still running one ran "+
			"cannot be told apart and %s left running: %s. corral kills %s when the last of those commands ends.]",
			plural(len(left), "process", "processes"), pick(len(left) == 1, "was", "were"), names(left),
			pick(len(left) == 1, "it", "them")))
	}
	return strings.Join(parts, "\n")
}

// maxNamed is how many survivors a note names; it counts the rest.
const maxNamed = 10

// names lists processes as "pid 42 (sleep), pid 43 (bash)", at most
// maxNamed of them, then how many more.
func names(ps []killtree.Process) string {
	var b strings.Builder
	for i, p := range ps {
		if i == maxNamed {
			fmt.Fprintf(&b, " and %d more", len(ps)-maxNamed)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "pid %d (%s)", p.Pid, p.Comm)
	}
	return b.String()
}

func seconds(d time.Duration) string {
	return strings.TrimSuffix(fmt.Sprintf("%gs", d.Seconds()), ".0")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func pick[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

// withNote appends note to a model view as its last line.
func withNote(view, note string) string {
	if note == "" {
		return view
	}
	if view != "" && !strings.HasSuffix(view, "\n") {
		view += "\n"
	}
	return view + note
}
