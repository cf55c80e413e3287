package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-sh/corral/journal"
)

// sweepEvery is how often idle sessions are swept while a journal is on.
const sweepEvery = time.Hour

// interruptedNote is the stderr of an entry Recover completes.
const interruptedNote = "[corral: this command's result was never recorded: the server stopped (was killed, " +
	"crashed or lost power) while the command ran (or, in a batch, waited for its turn), or could not write the result; corral completed this entry " +
	"at its next start. What the command printed is lost; its process tree did not outlive that server.]"

// journalState is the Supervisor's side of the journal.
type journalState struct {
	errors  atomic.Int64
	offline atomic.Bool     // the journal went offline (logged once)
	retryMu sync.Mutex      // serialises the retries
	retry   []pendingFinish // guarded by retryMu; finishes that failed, oldest first
	mu      sync.Mutex
	running map[string]int // guarded by mu; commands and jobs running per session
	// deleted counts the deletions of each session that had commands
	// running (DeleteSession), kept while it has: a command that began
	// before a deletion of its session spills nothing into it.
	deleted map[string]uint64 // guarded by mu
	// spillMu is held for reading while a command checks deleted and
	// writes a spill, and for writing while DeleteSession counts the
	// deletion and removes the spills: no spill lands in a deleted session.
	spillMu sync.RWMutex
	stop    chan struct{} // closed by Close; ends the sweep loop
	done    chan struct{} // closed when the sweep loop returned
}

// maxRetry bounds the failed finishes kept for a later attempt.
const maxRetry = 256

type pendingFinish struct {
	st     journal.Started
	at     time.Time
	result []byte
	cwd    string
}

// openJournal completes what an earlier process left unfinished, sweeps
// idle sessions and starts the hourly sweep. Called by New.
func (s *Supervisor) openJournal() error {
	if s.journal == nil {
		return nil
	}
	n, err := s.journal.Recover(time.Now(), s.interruptedResult)
	if err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	if n > 0 {
		s.log.Warn().Int("entries", n).Msg("journal: completed the entries of commands the previous server did not finish")
	}
	s.Sessions().Sweep()
	s.js.stop, s.js.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.js.done)
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-s.js.stop:
				return
			case <-t.C:
				s.Sessions().Sweep()
			}
		}
	}()
	return nil
}

func (s *Supervisor) closeJournal() {
	if s.js.stop != nil {
		close(s.js.stop)
		<-s.js.done
		s.js.stop = nil
	}
}

// interruptedResult is the Result of an entry left started by a server
// that stopped.
func (s *Supervisor) interruptedResult(e journal.Entry) (json.RawMessage, error) {
	res := Result{ID: e.ID, Stderr: interruptedNote, Aborted: true, Interrupted: true}
	return marshalResult(res)
}

// marshalResult renders a Result as corral's wire does (no HTML escaping).
func marshalResult(res Result) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// journalStart writes p's entry as started. A failure is logged and
// counted; the command then runs without an entry (its Result has no ID).
func (p *proc) journalStart() {
	s := p.s
	if p.v.entry != nil { // a batch's, written before the batch ran
		p.jst = p.v.entry
		return
	}
	if s.journal == nil {
		return
	}
	s.retryFinishes()
	st, err := s.journal.Start(p.v.Session, p.v.Command, p.begin)
	if err != nil {
		s.journalFailed(err, "start")
		p.jfail = err
		return
	}
	p.jst = &st
}

// journalFinish completes p's entry with res, setting res.ID first; the
// session's working directory goes with it when the command carried state.
// A failed write is logged, counted and retried before the next start;
// when the journal is offline (or the entry could not be started) res
// goes out without an ID and with a note saying it was not journaled.
func (p *proc) journalFinish(res *Result) {
	if p.jst == nil {
		if p.jfail != nil {
			res.Stderr = withNote(res.Stderr, notJournaled(p.jfail))
		}
		return
	}
	res.ID = p.jst.ID
	data, err := marshalResult(*res)
	if err != nil {
		p.s.journalFailed(err, "finish")
		res.ID = ""
		res.Stderr = withNote(res.Stderr, notJournaled(err))
		return
	}
	cwd := ""
	if p.state != nil {
		cwd = res.Cwd
	}
	f := pendingFinish{st: *p.jst, at: time.Now(), result: data, cwd: cwd}
	switch err := p.s.journal.Finish(f.st, f.at, f.result, f.cwd); {
	case err == nil:
	case errors.Is(err, journal.ErrNotFound):
		// The session was deleted (or swept) while the command ran.
		res.ID = ""
	case errors.Is(err, journal.ErrOffline):
		p.s.journalFailed(err, "finish")
		res.ID = ""
		res.Stderr = withNote(res.Stderr, notJournaled(err))
	default:
		p.s.journalFailed(err, "finish")
		p.s.js.retryMu.Lock()
		if len(p.s.js.retry) < maxRetry {
			p.s.js.retry = append(p.s.js.retry, f)
		}
		p.s.js.retryMu.Unlock()
	}
}

// journalAbandon completes the entry of a command whose shell did not
// start, so the session's seq keeps no gap and no later start takes it for
// one that was interrupted.
func (p *proc) journalAbandon(startErr error) {
	if p.jst == nil {
		return
	}
	res := Result{Stderr: fmt.Sprintf("[corral: the command did not start: %v]", startErr)}
	p.journalFinish(&res)
}

// retryFinishes writes the finishes that failed earlier; those that fail
// again stay for the next attempt.
func (s *Supervisor) retryFinishes() {
	s.js.retryMu.Lock()
	defer s.js.retryMu.Unlock()
	for len(s.js.retry) > 0 {
		f := s.js.retry[0]
		err := s.journal.Finish(f.st, f.at, f.result, f.cwd)
		if err != nil && !errors.Is(err, journal.ErrNotFound) && !errors.Is(err, journal.ErrFinished) {
			return
		}
		s.js.retry = s.js.retry[1:]
	}
}

// journalFailed logs and counts a journal failure. The journal going
// offline (a storage fault: journal's fault.go) is logged once, loudly;
// the failures that follow from it are counted only.
func (s *Supervisor) journalFailed(err error, what string) {
	s.js.errors.Add(1)
	if !errors.Is(err, journal.ErrOffline) {
		s.log.Error().Err(err).Str("op", what).Msg("journal write failed; the command's Result is returned without it")
		return
	}
	if s.js.offline.CompareAndSwap(false, true) {
		s.log.Error().Err(err).Str("op", what).Msg("JOURNAL OFFLINE: a storage fault took the journal offline. Commands go on running " +
			"and answering, but no Result is journaled (each says so) until corral restarts; the restart checks the store and " +
			"refuses it if it is damaged")
	}
}

// notJournaled is the stderr note of a Result the journal did not take
// because of err (docs/journal.md).
func notJournaled(err error) string {
	if errors.Is(err, journal.ErrOffline) {
		return "[corral: this Result was not journaled: the journal is offline after a storage fault (the server's log names it); " +
			"it has no id and the session's history will not list it.]"
	}
	return "[corral: this Result was not journaled: a journal write failed (the server's log says why); " +
		"it has no id and the session's history will not list it.]"
}

// Sweep deletes the sessions idle longer than the journal's
// retention, with their spill files and state, except those with a command
// or job running. It returns the IDs it swept; nil without a journal.
func (h *Sessions) Sweep() []string {
	s := h.s
	if s.journal == nil {
		return nil
	}
	swept, err := s.journal.Sweep(time.Now(), func(id string) bool { return s.sessionBusy(id) })
	if err != nil {
		s.journalFailed(err, "sweep")
	}
	for _, id := range swept {
		if s.spills != nil {
			if err := s.spills.RemoveSession(id); err != nil {
				s.log.Warn().Err(err).Str("session", id).Msg("remove the spills of a swept session")
			}
		}
		h.Forget(id)
	}
	if len(swept) > 0 {
		s.log.Info().Strs("sessions", swept).Msg("swept idle sessions")
	}
	return swept
}

// Journal is the journal of Config.Journal, nil when there is none.
func (h *Sessions) Journal() *journal.Journal { return h.s.journal }

// busy counts the commands and jobs running per session, for the sweep: a
// command of session starting (delta 1) or ending (-1). It returns the
// session's deletion count (journalState.deleted) as it stands.
func (s *Supervisor) busy(session string, delta int) uint64 {
	s.js.mu.Lock()
	defer s.js.mu.Unlock()
	if s.js.running == nil {
		s.js.running = map[string]int{}
	}
	s.js.running[session] += delta
	if s.js.running[session] <= 0 {
		delete(s.js.running, session)
		delete(s.js.deleted, session)
	}
	return s.js.deleted[session]
}

// sessionDeleted reports whether session was deleted since a command of it
// began with the deletion count began. Caller holds js.spillMu.
func (s *Supervisor) sessionDeleted(session string, began uint64) bool {
	s.js.mu.Lock()
	defer s.js.mu.Unlock()
	return s.js.deleted[session] != began
}

func (s *Supervisor) sessionBusy(id string) bool {
	s.js.mu.Lock()
	defer s.js.mu.Unlock()
	return s.js.running[id] > 0
}

// journaledCwd is the working directory the journal keeps for a session,
// "" when there is none.
func (s *Supervisor) journaledCwd(session string) string {
	if s.journal == nil {
		return ""
	}
	info, err := s.journal.Session(session)
	if err != nil {
		return ""
	}
	return info.Cwd
}

// Jobs lists the jobs of a session, running or retained, oldest
// first.
func (h *Sessions) Jobs(id string) []JobInfo {
	s := h.s
	s.jobs.mu.Lock()
	var jobs []*job
	for _, j := range s.jobs.jobs {
		if j.session == id {
			jobs = append(jobs, j)
		}
	}
	s.jobs.mu.Unlock()
	out := make([]JobInfo, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.info())
	}
	slices.SortFunc(out, func(a, b JobInfo) int { return a.StartedAt.Compare(b.StartedAt) })
	return out
}

// Delete kills the session's running jobs (their trees; their
// Results are journaled first), then deletes its journal entries and
// batches, its spill files and its state. Commands of it still running go
// on; their Results then carry no ID, and they write no spill file. It is no error when the session has
// nothing of these.
func (h *Sessions) Delete(id string) error {
	s := h.s
	s.jobs.mu.Lock()
	var running []*job
	for _, j := range s.jobs.jobs {
		if _, ended := j.exited(); !ended && j.session == id {
			running = append(running, j)
		}
	}
	s.jobs.mu.Unlock()
	for _, j := range running {
		j.cancel()
	}
	for _, j := range running {
		<-j.done
	}
	var errs []error
	if s.journal != nil {
		if err := s.journal.DeleteSession(id); err != nil && !errors.Is(err, journal.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	s.js.spillMu.Lock()
	s.js.mu.Lock()
	if s.js.running[id] > 0 {
		if s.js.deleted == nil {
			s.js.deleted = map[string]uint64{}
		}
		s.js.deleted[id]++
	}
	s.js.mu.Unlock()
	if s.spills != nil {
		if err := s.spills.RemoveSession(id); err != nil {
			errs = append(errs, err)
		}
	}
	s.js.spillMu.Unlock()
	h.Forget(id)
	return errors.Join(errs...)
}
