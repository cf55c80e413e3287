package supervisor

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/corral-sh/corral/budget"
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
}

// BatchResult is what a batch produced. It marshals to DESIGN.md's batch
// JSON; field names are a public contract.
type BatchResult struct {
	// ID names the batch ("b-…").
	ID string `json:"id"`
	// Session is the session the batch ran in.
	Session string `json:"session"`
	// Results holds every request's Result, in request order.
	Results []BatchEntry `json:"results"`
	// View, Truncated, KeptResults, ViewBytes and TotalBytes are the
	// batch's model text and what it kept (budget.BatchView): every
	// Result's Text after a "[k/N] $ <command>" header, or the marker and
	// the tail of that when it exceeds the budget.
	View        string `json:"view"`
	Truncated   bool   `json:"truncated"`
	KeptResults int    `json:"keptResults"`
	ViewBytes   int    `json:"viewBytes"`
	TotalBytes  int    `json:"totalBytes"`
}

// BatchEntry is one Result of a batch with its journal ID ("r-…"; empty,
// and omitted from the JSON, when the result was not journaled).
type BatchEntry struct {
	ID string `json:"id,omitempty"`
	Result
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
// them. Safe for concurrent use.
func (s *Supervisor) RunBatch(ctx context.Context, b BatchRequest) (BatchResult, error) {
	b, err := s.validateBatch(b)
	if err != nil {
		return BatchResult{}, err
	}
	n := len(b.Requests)
	res := BatchResult{ID: s.newBatchID(), Session: b.Session, Results: make([]BatchEntry, n)}
	slots := make(chan struct{}, b.Concurrency)
	var wg sync.WaitGroup
	for i, r := range b.Requests {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			res.Results[i].Result = s.notStarted("the batch was cancelled before its turn")
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			out, err := s.Run(ctx, r)
			var re *RequestError
			switch {
			case errors.As(err, &re):
				out = s.notStarted(re.Reason)
			case err != nil:
				out = s.notStarted(err.Error())
			}
			res.Results[i].Result = out
		})
	}
	wg.Wait()
	items := make([]budget.BatchItem, n)
	for i, e := range res.Results {
		items[i] = budget.BatchItem{Command: b.Requests[i].Command, Text: e.Text()}
	}
	// The journal is not wired yet: the marker points at the batch's own
	// results rather than at a journal that does not exist.
	v := budget.BatchView(items, budget.BatchOptions{MaxBytes: b.Budget})
	res.View, res.Truncated, res.KeptResults, res.ViewBytes, res.TotalBytes =
		v.View, v.Truncated, v.KeptResults, v.ViewBytes, v.TotalBytes
	return res, nil
}

// notStarted is the Result of a batch request whose command did not start,
// for the reason why.
func (s *Supervisor) notStarted(why string) Result {
	return Result{Stderr: "[corral: the command did not start: " + why + ".]", Kill: KillInfo{Tier: string(s.Tier())}}
}

// CheckBatch validates b as RunBatch does, without running anything: a
// front end that must reserve resources for a batch checks it first.
func (s *Supervisor) CheckBatch(b BatchRequest) error {
	_, err := s.validateBatch(b)
	return err
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
