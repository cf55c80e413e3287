package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/spill"
)

// Batch bounds (DESIGN.md, Batch).
const (
	// MaxBatchRequests is the most requests one batch holds.
	MaxBatchRequests = 32
	// DefaultBatchConcurrency is how many of a batch's commands run at once
	// unless the batch says; MaxBatchConcurrency is the most it may say.
	DefaultBatchConcurrency = 4
	MaxBatchConcurrency     = 32
	// DefaultBatchBudget is the byte budget of a batch's view; a batch may
	// choose between MinBatchBudget and MaxBatchBudget.
	DefaultBatchBudget = budget.DefaultBatchBytes
	MinBatchBudget     = 4 << 10
	MaxBatchBudget     = 16 << 20
)

// BatchRequest is several commands handed over at once, to run in
// parallel and be read as one bounded text.
type BatchRequest struct {
	// Session is the session every request runs in; "" is "default". A
	// request may repeat it or name none; naming another is invalid.
	Session string
	// Requests are the commands, 1 to MaxBatchRequests, each a Request as
	// Run takes it but without Yield.
	Requests []Request
	// Concurrency bounds the commands running at once; 0 is
	// DefaultBatchConcurrency, else 1 to MaxBatchConcurrency.
	Concurrency int
	// Budget bounds the view in bytes (the marker aside); 0 is
	// DefaultBatchBudget, else MinBatchBudget to MaxBatchBudget.
	Budget int
	// Reserve, when set, is called once the batch is valid and before
	// anything is journaled or started, with its concurrency: a front end
	// that must hold resources for the batch takes them there. It returns
	// the context the batch runs under, the concurrency it may use (at
	// most the one given; at least 1), and a release that RunBatch calls
	// before it returns. An error refuses the batch: RunBatch returns it and
	// nothing starts.
	Reserve func(ctx context.Context, concurrency int) (context.Context, int, func(), error)
}

// BatchResult is what a batch produced. Its JSON (JSON) is DESIGN.md's
// batch JSON; field names are a public contract.
type BatchResult struct {
	// ID names the batch ("b-…"): its journal ID when the Supervisor has a
	// journal.
	ID string `json:"id"`
	// Session is the session the batch ran in.
	Session string `json:"session"`
	// Results holds every request's Result, in request order; each names
	// its journal entry (Result.ID) when it has one.
	Results []Result `json:"results"`
	// View, Truncated, KeptResults, ViewBytes and TotalBytes are the
	// batch's model text and what it kept (budget.BatchView): every
	// Result's Text after a "[k/N] $ <command>" header, or the marker and
	// the tail of that when it exceeds the budget.
	View        string `json:"view"`
	Truncated   bool   `json:"truncated"`
	KeptResults int    `json:"keptResults"`
	ViewBytes   int    `json:"viewBytes"`
	TotalBytes  int    `json:"totalBytes"`

	raw []byte // the JSON as the journal holds it; nil when not journaled whole
}

// JSON is the batch's JSON. When the batch and all its Results were
// journaled it is exactly what BatchJSON returns for it, then and after a
// restart; otherwise it renders the fields the same way.
func (r BatchResult) JSON() []byte {
	if r.raw != nil {
		return r.raw
	}
	results := make([]json.RawMessage, len(r.Results))
	for i, res := range r.Results {
		results[i], _ = marshalResult(res)
	}
	return batchJSON(r.ID, r.Session, results, r.viewJSON())
}

// batchView is the part of a batch's JSON after its results, as journaled.
type batchView struct {
	View        string `json:"view"`
	Truncated   bool   `json:"truncated"`
	KeptResults int    `json:"keptResults"`
	ViewBytes   int    `json:"viewBytes"`
	TotalBytes  int    `json:"totalBytes"`
}

func (r BatchResult) viewJSON() []byte {
	b, _ := marshalJSON(batchView{r.View, r.Truncated, r.KeptResults, r.ViewBytes, r.TotalBytes})
	return b
}

// RunBatch runs the requests of b, at most b.Concurrency at once, starting
// them in order, and returns every Result together with the batch's view.
// Every request is validated before anything starts: one invalid request
// (or a batch of 0 or more than MaxBatchRequests, a bad concurrency or
// budget) returns an error wrapping ErrInvalidRequest that names it
// ("requests[3]: timeout must be ..."), and nothing runs.
//
// Once validated, RunBatch returns a Result for every request, in request
// order, and a nil error. Cancelling ctx aborts the commands running and
// starts no more: a request that never started, or whose shell failed to
// start (the Supervisor is closing, the kernel refused it), has a Result
// with neither exit code nor signal, whose stderr says why it did not
// start. Compaction shapes the view only; the Results are as Run returns
// them.
//
// With a journal (Config.Journal), every request's entry is written as
// started, in request order, and the batch record with their IDs, in one
// synced commit before the first command starts (an entry's startedAt is
// therefore the batch's start); each entry is completed as its command ends, and the
// batch record with its view once all have. A batch cut short by the
// server's death is completed at the next start as interrupted (Sessions.Batch).
// Safe for concurrent use.
func (s *Supervisor) RunBatch(ctx context.Context, b BatchRequest) (BatchResult, error) {
	b, err := s.validateBatch(b)
	if err != nil {
		return BatchResult{}, err
	}
	if b.Reserve != nil {
		var release func()
		var granted int
		if ctx, granted, release, err = b.Reserve(ctx, b.Concurrency); err != nil {
			return BatchResult{}, err
		}
		defer release()
		b.Concurrency = min(max(granted, 1), b.Concurrency)
	}
	n := len(b.Requests)
	res := BatchResult{ID: s.newBatchID(), Session: b.Session, Results: make([]Result, n)}
	entries, batch := s.startBatch(b)
	if batch != nil {
		res.ID = batch.ID
	}
	slots := make(chan struct{}, b.Concurrency)
	var wg sync.WaitGroup
	for i, r := range b.Requests {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			res.Results[i] = s.notStarted(entries[i], "the batch was cancelled before its turn")
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			res.Results[i] = s.runEntry(ctx, r, entries[i])
		})
	}
	wg.Wait()
	journaled := s.reread(res.Results, entries)

	items := make([]budget.BatchItem, n)
	for i, r := range res.Results {
		items[i] = budget.BatchItem{Command: b.Requests[i].Command, Text: r.TextOn(FaceHTTP)}
	}
	// The marker sends the reader to the journal only when every result is
	// there.
	session := ""
	if journaled {
		session = b.Session
	}
	v := budget.BatchView(items, budget.BatchOptions{MaxBytes: b.Budget, Session: session})
	res.View, res.Truncated, res.KeptResults, res.ViewBytes, res.TotalBytes =
		v.View, v.Truncated, v.KeptResults, v.ViewBytes, v.TotalBytes
	if batch != nil {
		if err := s.journal.EndBatch(b.Session, batch.ID, time.Now(), res.viewJSON()); err != nil {
			s.journalFailed(err, "end batch")
		} else if journaled {
			res.raw, err = s.Sessions().Batch(b.Session, batch.ID)
			if err != nil {
				s.journalFailed(err, "read batch")
			}
		}
	}
	return res, nil
}

// startBatch writes the entries of b's requests as started, in order,
// and the batch record with their IDs, in one synced commit. Without a
// journal, or when the write fails (logged and counted), it returns no
// entries and no batch.
func (s *Supervisor) startBatch(b BatchRequest) ([]*journal.Started, *journal.Batch) {
	entries := make([]*journal.Started, len(b.Requests))
	if s.journal == nil {
		return entries, nil
	}
	s.retryFinishes()
	commands := make([]string, len(b.Requests))
	for i, r := range b.Requests {
		commands[i] = r.Command
	}
	sts, bt, err := s.journal.StartBatchEntries(b.Session, commands, time.Now())
	if err != nil {
		s.journalFailed(err, "start batch")
		return entries, nil
	}
	for i := range sts {
		entries[i] = &sts[i]
	}
	return entries, &bt
}

// runEntry runs one request of a batch with its journal entry (nil for
// none). A command that did not start gets notStarted's Result, and its
// entry is completed with it unless the start already did.
func (s *Supervisor) runEntry(ctx context.Context, r Request, st *journal.Started) Result {
	v, err := s.validate(r)
	if err == nil {
		v.entry = st
		var p *proc
		if p, err = s.start(v); err == nil {
			return p.finish(p.supervise(ctx))
		}
	}
	var re *RequestError
	if errors.As(err, &re) {
		return s.notStarted(st, re.Reason)
	}
	return s.notStarted(st, err.Error())
}

// notStarted is the Result of a batch request whose command did not start,
// for the reason why; its entry, when it has one still open, is completed
// with it.
func (s *Supervisor) notStarted(st *journal.Started, why string) Result {
	res := Result{Stderr: "[corral: the command did not start: " + why + ".]", Kill: KillInfo{Tier: string(s.trees.Tier())}}
	if st == nil {
		return res
	}
	res.ID = st.ID
	data, err := marshalResult(res)
	if err == nil {
		err = s.journal.Finish(*st, time.Now(), data, "")
	}
	if err != nil && !errors.Is(err, journal.ErrFinished) {
		s.journalFailed(err, "finish")
		res.ID = ""
		if !errors.Is(err, journal.ErrNotFound) { // not a deleted session
			res.Stderr = withNote(res.Stderr, notJournaled(err))
		}
	}
	return res
}

// reread replaces each journaled Result with the one its entry holds (the
// same Result, unless the start wrote its own), so that the view is made of
// what the journal keeps. It reports whether every Result is journaled.
func (s *Supervisor) reread(results []Result, entries []*journal.Started) bool {
	whole := s.journal != nil
	for i, st := range entries {
		if st == nil || results[i].ID == "" {
			whole = false
			continue
		}
		e, err := s.journal.Entry(st.Session, st.ID)
		var r Result
		if err == nil && e.EndedAt != nil && json.Unmarshal(e.Result, &r) == nil {
			results[i] = r
			continue
		}
		whole = false
	}
	return whole
}

// Batch returns a journaled batch's JSON: while it runs, its results
// so far (null for those not ended) and "running": true; once it ended,
// exactly the JSON RunBatch's BatchResult.JSON gave, every time; when the
// server died before it ended, the results the journal holds (those cut
// short completed as interrupted) and "interrupted": true. Errors wrap
// journal.ErrNotFound for an unknown session or batch, and ErrNoJournal
// without a journal.
func (h *Sessions) Batch(session, id string) ([]byte, error) {
	s := h.s
	if s.journal == nil {
		return nil, ErrNoJournal
	}
	bt, err := s.journal.Batch(session, id)
	if err != nil {
		return nil, fmt.Errorf("supervisor: batch %s: %w", id, err)
	}
	results := make([]json.RawMessage, len(bt.ResultIDs))
	for i, rid := range bt.ResultIDs {
		results[i] = json.RawMessage("null")
		if rid == "" {
			continue
		}
		e, err := s.journal.Entry(session, rid)
		switch {
		case errors.Is(err, journal.ErrNotFound): // trimmed or never written
		case err != nil:
			return nil, fmt.Errorf("supervisor: batch %s: %w", id, err)
		default:
			results[i] = e.Result
		}
	}
	tail := bt.View
	switch {
	case bt.Interrupted:
		tail = json.RawMessage(`{"interrupted":true}`)
	case bt.EndedAt == nil:
		tail = json.RawMessage(`{"running":true}`)
	}
	return batchJSON(bt.ID, bt.Session, results, tail), nil
}

// ErrNoJournal is BatchJSON's error when the Supervisor has no journal.
var ErrNoJournal = errors.New("supervisor: no journal")

// batchJSON renders a batch: its ID, session and results, then the members
// of tail (a JSON object).
func batchJSON(id, session string, results []json.RawMessage, tail []byte) []byte {
	var b bytes.Buffer
	ids, _ := marshalJSON(id)
	sess, _ := marshalJSON(session)
	b.WriteString(`{"id":`)
	b.Write(ids)
	b.WriteString(`,"session":`)
	b.Write(sess)
	b.WriteString(`,"results":[`)
	for i, r := range results {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r)
	}
	b.WriteByte(']')
	if t := bytes.TrimSpace(tail); len(t) > 2 {
		b.WriteByte(',')
		b.Write(t[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes()
}

// marshalJSON renders v as corral's wire does (no HTML escaping, no
// trailing newline).
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// validateBatch checks b and every request in it, and fills the defaults.
// It touches nothing but a stat of each request's Dir.
func (s *Supervisor) validateBatch(b BatchRequest) (BatchRequest, error) {
	switch n := len(b.Requests); {
	case n == 0 || n > MaxBatchRequests:
		return b, invalid("a batch holds 1 to %d requests, got %d", MaxBatchRequests, n)
	case b.Concurrency < 0 || b.Concurrency > MaxBatchConcurrency:
		return b, invalid("concurrency must be between 1 and %d, got %d", MaxBatchConcurrency, b.Concurrency)
	case b.Budget != 0 && (b.Budget < MinBatchBudget || b.Budget > MaxBatchBudget):
		return b, invalid("budget must be between %d (4 KiB) and %d (16 MiB) bytes, got %d", MinBatchBudget, MaxBatchBudget, b.Budget)
	}
	if b.Concurrency == 0 {
		b.Concurrency = DefaultBatchConcurrency
	}
	if b.Budget == 0 {
		b.Budget = DefaultBatchBudget
	}
	if b.Session == "" {
		b.Session = StatelessSession
	}
	if spill.ValidateName("session", b.Session) != nil {
		return b, invalid("session %q %s", b.Session, spill.NameRule)
	}
	reqs := make([]Request, len(b.Requests))
	for i, r := range b.Requests {
		bad := func(format string, args ...any) (BatchRequest, error) {
			return b, invalid("requests[%d]: "+format, append([]any{i}, args...)...)
		}
		if r.Session != "" && r.Session != b.Session {
			return bad("session %q differs from the batch's session %q; a batch runs in one session", r.Session, b.Session)
		}
		if r.Yield != 0 {
			return bad("yield is not supported in a batch")
		}
		r.Session = b.Session
		if _, err := s.validate(r); err != nil {
			if re, ok := err.(*RequestError); ok {
				return bad("%s", re.Reason)
			}
			return b, err
		}
		// The one E2BIG that can be told before anything starts: on Linux
		// no argument may exceed MAX_ARG_STRLEN.
		if runtime.GOOS == "linux" && len(r.Command) >= maxArgStrlen {
			return bad("the command (%d bytes) exceeds the kernel's limit for one argument (%d KiB, MAX_ARG_STRLEN); pass large input through stdin or a file",
				len(r.Command), maxArgStrlen>>10)
		}
		reqs[i] = r
	}
	b.Requests = reqs
	return b, nil
}

func (s *Supervisor) newBatchID() string {
	return "b-" + strconv.FormatInt(int64(os.Getpid()), 36) + "-" + strconv.FormatUint(s.seq.Add(1), 36)
}
