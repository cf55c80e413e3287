package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/spill"
	"github.com/corral-sh/corral/supervisor"
)

// BatchBody is the body of POST /v1/batch. Unknown fields are refused.
type BatchBody struct {
	// Session is the session every request runs in (each may repeat it or
	// name none); absent means "default".
	Session string `json:"session,omitempty"`
	// Requests are 1 to 32 commands, each as POST /v1/exec takes it
	// (without yield).
	Requests []ExecRequest `json:"requests"`
	// Concurrency bounds the commands running at once, 1 to 32; absent
	// means 4.
	Concurrency *int `json:"concurrency,omitempty"`
	// Budget bounds the view in bytes, 4 KiB to 16 MiB; absent means 256 KiB.
	Budget *int `json:"budget,omitempty"`
}

// request turns the wire form into a supervisor batch. An explicit 0 for
// concurrency or budget is refused (the library reads 0 as the default).
func (b BatchBody) request(maxTimeout time.Duration) (supervisor.BatchRequest, error) {
	out := supervisor.BatchRequest{Session: b.Session, Requests: make([]supervisor.Request, len(b.Requests))}
	if b.Concurrency != nil {
		if *b.Concurrency == 0 {
			return out, errorf(ErrInvalidArgument, "concurrency must be between 1 and %d, got 0", supervisor.MaxBatchConcurrency)
		}
		out.Concurrency = *b.Concurrency
	}
	if b.Budget != nil {
		if *b.Budget == 0 {
			return out, errorf(ErrInvalidArgument, "budget must be between %d (4 KiB) and %d (16 MiB) bytes, got 0",
				supervisor.MinBatchBudget, supervisor.MaxBatchBudget)
		}
		out.Budget = *b.Budget
	}
	for i, e := range b.Requests {
		r, err := e.request(maxTimeout)
		if err != nil {
			return out, errorf(ErrInvalidArgument, "requests[%d]: %s", i, Message(err))
		}
		out.Requests[i] = r
	}
	return out, nil
}

// batch serves POST /v1/batch. The whole batch is validated before
// anything starts. It then runs at most min(concurrency, requests,
// Config.MaxConcurrent) commands at once and holds that many of the
// server's command slots for as long as it runs, taken all at once: when
// that many are not free it is refused with RESOURCE_EXHAUSTED (429) and
// nothing starts.
func (s *Server) batch(w http.ResponseWriter, r *http.Request) {
	var body BatchBody
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	b, err := body.request(s.sup.Bounds().MaxTimeout)
	if err != nil {
		s.metrics.outcome(FaceHTTP, OutcomeInvalid)
		writeError(w, err)
		return
	}
	for i := range b.Requests {
		b.Requests[i].Owner = s.httpOwner(r)
	}
	// The slots are taken once the batch is valid, all at once, and held
	// while it runs.
	b.Reserve = func(ctx context.Context, concurrency int) (context.Context, int, func(), error) {
		slots := min(len(b.Requests), concurrency, cap(s.slots))
		ctx, release, err := s.acquireN(ctx, FaceHTTP, slots)
		return ctx, slots, release, err
	}
	// A client that disconnects gets the batch aborted without the grace
	// (supervisor.ErrClientGone).
	ctx, end := whileConnected(r.Context())
	defer end(nil)
	res, err := s.sup.RunBatch(ctx, b)
	if errors.Is(err, supervisor.ErrInvalidRequest) {
		s.metrics.outcome(FaceHTTP, OutcomeInvalid)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	for _, e := range res.Results {
		s.metrics.observeResult(FaceHTTP, e, nil)
	}
	writeJSON(w, http.StatusOK, json.RawMessage(res.JSON()))
}

// getBatch serves GET /v1/sessions/{id}/batches/{bid}: the batch's JSON as
// the journal holds it (supervisor.Sessions.Batch), byte for byte what POST
// /v1/batch answered once the batch ended, also after a restart.
func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	id, bid := r.PathValue("id"), r.PathValue("bid")
	if err := spill.ValidateName("session", id); err != nil {
		writeError(w, &wireError{kind: spill.ErrInvalidName, reason: fmt.Sprintf("session %q %s", id, spill.NameRule), cause: err})
		return
	}
	body, err := s.sup.Sessions().Batch(id, bid)
	switch {
	case errors.Is(err, supervisor.ErrNoJournal):
		writeError(w, &wireError{kind: journal.ErrNotFound, reason: "this server keeps no journal (it has no data directory)"})
		return
	case errors.Is(err, journal.ErrNotFound):
		writeError(w, &wireError{kind: journal.ErrNotFound, reason: fmt.Sprintf("no batch %q in session %q", bid, id), cause: err})
		return
	case err != nil:
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, json.RawMessage(body))
}
