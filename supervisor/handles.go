package supervisor

import "github.com/corral-sh/corral/spill"

// Jobs is the background-job face of a Supervisor (Supervisor.Jobs): start
// a command that outlives the call, read its output by cursor, write to its
// stdin, wait for it, kill it. The zero value is not usable; it is safe for
// concurrent use, as the Supervisor is, and valid until Close.
type Jobs struct{ s *Supervisor }

// Jobs returns the handle for background jobs.
func (s *Supervisor) Jobs() *Jobs { return &Jobs{s: s} }

// Sessions is the session face of a Supervisor (Supervisor.Sessions): the
// state named sessions keep (working directory, exported variables), their
// jobs, and their journal. The zero value is not usable; it is safe for
// concurrent use, as the Supervisor is, and valid until Close.
type Sessions struct{ s *Supervisor }

// Sessions returns the handle for sessions.
func (s *Supervisor) Sessions() *Sessions { return &Sessions{s: s} }

// Spills is the spill store the sessions' spill files live in (reads of
// them, their sweep); nil when spills are disabled.
func (h *Sessions) Spills() *spill.Store { return h.s.spills }
