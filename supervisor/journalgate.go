package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/corral-sh/corral/internal/shellstate"
)

// The start gate takes the journal's first commit off a command's path.
// A journaled command is recorded as started before anything of it runs,
// so that a server that dies meanwhile leaves an entry the next start
// completes. Committing that entry (a synced bbolt transaction) before the
// fork would add its whole latency to every command; instead the shell
// starts at once and holds at the gate (the gate line of shellstate.Script, the first thing its
// BASH_ENV script does, before the command's own BASH_ENV) while the commit
// runs beside its start-up, and the supervisor opens the gate by writing a
// byte once the entry is committed. A supervisor that dies before it
// closes the write end: the shell reads EOF and exits 125 without running
// anything of the command (and the watchdog kills the tree anyway).
//
// Only bash reads a BASH_ENV script, and the shared scripts are memfds
// (Linux); elsewhere, for a program run by Argv, and for a batch's
// entries (written before the batch runs), the commit stays before the
// fork.

// testHookGateCommitted, when set by a test, runs once a gated command's
// entry is committed, before its gate opens.
var testHookGateCommitted func(*proc)

// startGate is one command's gate.
type startGate struct {
	r, w  *os.File      // the gate pipe; the child gets r as shellstate.GateFD
	begun bool          // begin was called
	done  chan struct{} // closed when the journal's start returned
}

// gateable reports whether v's command may start behind a gate.
func (s *Supervisor) gateable(v validated) bool {
	return s.journal != nil && v.entry == nil && v.Argv == nil && filepath.Base(s.shell) == "bash"
}

// newGate makes a gate pipe, or returns nil when it cannot: the command
// then commits before it starts.
func newGate() *startGate {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	return &startGate{r: r, w: w, done: make(chan struct{})}
}

// attach gives cmd, whose environment and descriptors are otherwise
// final, the gate: a tracked command's script (st) gains the gate's
// descriptor if it was made gated; an untracked or static one gets the
// gate-only script and the BASH_ENV hand-over. It reports false, closing the gate,
// when the command cannot have it.
func (g *startGate) attach(s *Supervisor, cmd *exec.Cmd, st *stateStart) bool {
	switch {
	case st != nil && st.ch != nil && !st.gated:
		g.abandon()
		return false
	case st == nil || st.ch == nil: // untracked, or static (shellstate.LeavesAlone)
		script, err := s.sessions.sharedScript(false, true)
		if err != nil {
			g.abandon()
			return false
		}
		bashEnv, has := lookupEnv(cmd.Env, "BASH_ENV")
		cmd.Env = append(cmd.Env, shellstate.Env(bashEnv, has)...)
		cmd.ExtraFiles = make([]*os.File, shellstate.GateFD-2)
		cmd.ExtraFiles[shellstate.ScriptFD-3] = script
	}
	cmd.ExtraFiles[shellstate.GateFD-3] = g.r
	return true
}

// abandon closes a gate that was never begun.
func (g *startGate) abandon() {
	g.r.Close()
	g.w.Close()
}

// begin writes p's entry as started beside the shell's start.
func (g *startGate) begin(p *proc) {
	g.begun = true
	go func() {
		defer close(g.done)
		p.journalStart()
		if testHookGateCommitted != nil {
			testHookGateCommitted(p)
		}
	}()
}

// release waits for the entry and opens the gate of a shell that started,
// or closes it. Either way the entry (p.jst) is settled when it returns.
func (g *startGate) release(started bool) {
	<-g.done
	g.r.Close()
	if started {
		// One byte into an empty pipe: never blocks. A failure means the
		// shell is gone already.
		g.w.Write([]byte{'1'})
	}
	g.w.Close()
}
