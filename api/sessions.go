package api

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/spill"
	"github.com/corral-sh/corral/supervisor"
)

// DefaultHistoryLimit is how many entries a results read without limit
// returns.
const DefaultHistoryLimit = 100

// SessionSummary is one session in GET /v1/sessions. Results counts its
// journaled entries, Jobs its running background jobs.
type SessionSummary struct {
	ID         string    `json:"id"`
	Cwd        string    `json:"cwd"`
	Results    int       `json:"results"`
	Jobs       int       `json:"jobs"`
	LastUsedAt time.Time `json:"lastUsedAt"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []SessionSummary `json:"sessions"`
}

// SessionDetail is the body of GET /v1/sessions/{id}. EnvNames names the
// exported variables the session carries (never their values); Jobs lists
// its background jobs, running and retained.
type SessionDetail struct {
	ID         string               `json:"id"`
	Cwd        string               `json:"cwd"`
	EnvNames   []string             `json:"envNames"`
	Results    int                  `json:"results"`
	Jobs       []supervisor.JobInfo `json:"jobs"`
	CreatedAt  time.Time            `json:"createdAt"`
	LastUsedAt time.Time            `json:"lastUsedAt"`
}

// sessionID reads and checks the {id} of a session route.
func sessionID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := spill.ValidateName("session", id); err != nil {
		return "", &wireError{kind: spill.ErrInvalidName, reason: fmt.Sprintf("session %q %s", id, spill.NameRule), cause: err}
	}
	return id, nil
}

// details merges what the journal keeps of a session with what the
// supervisor holds in memory (its current state and the jobs owner may see,
// tenancy.go); ok is false when neither knows it.
func (s *Server) details(id string, jinfo *journal.SessionInfo, owner string) (SessionDetail, bool) {
	d := SessionDetail{ID: id, EnvNames: []string{}, Jobs: []supervisor.JobInfo{}}
	for _, j := range s.sup.Sessions().Jobs(id) {
		if s.sharedJobs || s.ownJob(owner, j.ID) == nil {
			d.Jobs = append(d.Jobs, j)
		}
	}
	ok := len(d.Jobs) > 0
	if jinfo == nil {
		if j := s.sup.Sessions().Journal(); j != nil {
			if info, err := j.Session(id); err == nil {
				jinfo = &info
			}
		}
	}
	if jinfo != nil {
		ok = true
		d.Cwd, d.Results, d.CreatedAt, d.LastUsedAt = jinfo.Cwd, jinfo.Results, jinfo.CreatedAt, jinfo.LastUsedAt
	}
	if mem, found := s.sup.Sessions().Get(id); found {
		ok = true
		d.Cwd, d.EnvNames = mem.Cwd, mem.EnvNames
		if d.CreatedAt.IsZero() || mem.CreatedAt.Before(d.CreatedAt) {
			d.CreatedAt = mem.CreatedAt
		}
		if mem.LastUsedAt.After(d.LastUsedAt) {
			d.LastUsedAt = mem.LastUsedAt
		}
	}
	return d, ok
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	ids := map[string]*journal.SessionInfo{}
	if j := s.sup.Sessions().Journal(); j != nil {
		infos, err := j.Sessions()
		if err != nil {
			writeError(w, fmt.Errorf("api: list sessions: %w", err))
			return
		}
		for i := range infos {
			ids[infos[i].ID] = &infos[i]
		}
	}
	for _, mem := range s.sup.Sessions().List() {
		if _, ok := ids[mem.ID]; !ok {
			ids[mem.ID] = nil
		}
	}
	out := SessionList{Sessions: []SessionSummary{}}
	for id, jinfo := range ids {
		d, _ := s.details(id, jinfo, s.httpOwner(r))
		running := 0
		for _, job := range d.Jobs {
			if job.State == supervisor.JobRunning {
				running++
			}
		}
		out.Sessions = append(out.Sessions, SessionSummary{ID: id, Cwd: d.Cwd, Results: d.Results, Jobs: running, LastUsedAt: d.LastUsedAt})
	}
	slices.SortFunc(out.Sessions, func(a, b SessionSummary) int {
		return cmp.Or(b.LastUsedAt.Compare(a.LastUsedAt), cmp.Compare(a.ID, b.ID))
	})
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	id, err := sessionID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	d, ok := s.details(id, nil, s.httpOwner(r))
	if !ok {
		writeError(w, errorf(ErrNotFound, "no session %q", id))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// sessionJournal returns the journal, or the error for a server without one.
func (s *Server) sessionJournal() (*journal.Journal, error) {
	j := s.sup.Sessions().Journal()
	if j == nil && s.noJournal != "" {
		return nil, errorf(ErrNotFound, "this server keeps no journal: %s", s.noJournal)
	}
	if j == nil {
		return nil, errorf(ErrNotFound, "this server keeps no journal (it runs without a data directory)")
	}
	return j, nil
}

// listResults serves GET /v1/sessions/{id}/results?after=&limit=: the
// entries with a seq above after (default 0), at most limit (default
// DefaultHistoryLimit, at most journal.MaxList), and next, the seq to pass
// as after for the following page. Each entry is its stored bytes.
func (s *Server) listResults(w http.ResponseWriter, r *http.Request) {
	id, err := sessionID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	var after uint64
	if v := q.Get("after"); q.Has("after") {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, errorf(ErrInvalidArgument, "after must be a seq number of 0 or more, got %q", v))
			return
		}
		after = uint64(n)
	}
	limit := DefaultHistoryLimit
	if v := q.Get("limit"); q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > journal.MaxList {
			writeError(w, errorf(ErrInvalidArgument, "limit must be a whole number from 1 to %d, got %q", journal.MaxList, v))
			return
		}
		limit = n
	}
	j, err := s.sessionJournal()
	if err != nil {
		writeError(w, err)
		return
	}
	entries, next, err := j.List(id, after, limit)
	if err != nil {
		writeError(w, journalError(err, id))
		return
	}
	var b bytes.Buffer
	b.WriteString(`{"entries":[`)
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e)
	}
	fmt.Fprintf(&b, `],"next":%d}`+"\n", next)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b.Bytes())
}

// getResult serves one entry, its stored bytes as they are.
func (s *Server) getResult(w http.ResponseWriter, r *http.Request) {
	id, err := sessionID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	j, err := s.sessionJournal()
	if err != nil {
		writeError(w, err)
		return
	}
	raw, err := j.Get(id, r.PathValue("rid"))
	if err != nil {
		writeError(w, journalError(err, id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

// journalError gives a journal error its wire form.
func journalError(err error, session string) error {
	var nf error
	switch {
	case errors.Is(err, journal.ErrNotFound):
		nf = errorf(ErrNotFound, "%s", trimPrefix(err))
	case errors.Is(err, journal.ErrInvalidSession):
		nf = &wireError{kind: spill.ErrInvalidName, reason: fmt.Sprintf("session %q %s", session, spill.NameRule), cause: err}
	default:
		return fmt.Errorf("api: journal: %w", err)
	}
	return nf
}

// trimPrefix is a journal error's text without "journal: not found: ".
func trimPrefix(err error) string {
	msg := err.Error()
	for _, p := range []string{"journal: not found: ", "journal: "} {
		if len(msg) > len(p) && msg[:len(p)] == p {
			return "no " + msg[len(p):]
		}
	}
	return msg
}

// deleteSession kills the session's jobs and removes its journal entries,
// spill files and state: 204, also when it had none of these.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	id, err := sessionID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.sup.Sessions().Delete(id); err != nil {
		writeError(w, fmt.Errorf("api: delete session %s: %w", id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
