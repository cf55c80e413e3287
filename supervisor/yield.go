package supervisor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/corral-sh/corral/budget"
)

// runYielding runs a command with a yield: as a job from the start, so the
// same tree, capture and timeout go on after the hand-over. Until the yield
// the caller's ctx aborts it as it aborts any command.
func (s *Supervisor) runYielding(ctx context.Context, v validated) (Result, error) {
	var g *gate
	if v.OnEvent != nil {
		g = &gate{cb: v.OnEvent}
		v.OnEvent = g.call
	}
	j, p, err := s.launchJob(v, false)
	if err != nil {
		return Result{}, err
	}
	var yield <-chan time.Time // none: a terminal command without a yield runs to its end
	if v.Yield > 0 {
		timer := time.NewTimer(v.Yield)
		defer timer.Stop()
		yield = timer.C
	}
	for {
		// A watched command (docs/terminals.md) yields as soon as it
		// waits for input, too.
		var woken <-chan struct{}
		if j.watch != nil && v.Yield > 0 {
			woken = j.waiter()
			if w, _ := j.currentWait(); w != nil {
				return s.handOver(j, p, g, w), nil
			}
		}
		select {
		case <-j.done:
			res, _ := j.exited()
			return *res, nil
		case <-ctx.Done():
			j.cancelCause(context.Cause(ctx))
			<-j.done
			res, _ := j.exited()
			return *res, nil
		case <-yield:
			return s.handOver(j, p, g, nil), nil
		case <-woken:
		}
	}
}

// handOver ends a yielding call: the command goes on as a listed job and
// the call returns what it printed so far (w: because it waits for input),
// or its Result when it ended meanwhile.
func (s *Supervisor) handOver(j *job, p *proc, g *gate, w *Waiting) Result {
	// The caller's callback ends with the result this call returns; the
	// job's later events are for the job API, not for it.
	g.close()
	if s.jobs.listJob(j) {
		res := p.soFar(j, w, p.v.Yield)
		if w != nil {
			g.deliverWaiting(w)
		}
		g.deliver(res)
		return res
	}
	<-j.done
	res, _ := j.exited()
	g.deliver(*res)
	return *res
}

// soFar is the Result of a command handed over at its yield (after
// yielded): the model views of what it printed until now (a cut view's
// marker names no spill file: the job's final Result does), and a note
// saying where it went. The job's cursorless reads start after what these
// views counted.
func (p *proc) soFar(j *job, w *Waiting, yielded time.Duration) Result {
	res := Result{Running: true, JobID: j.id, DurationMs: time.Since(p.begin).Milliseconds(),
		Kill: KillInfo{Tier: string(p.tree.Tier())}, Waiting: w}
	if p.jst != nil {
		// The entry its final Result (from the job) will complete.
		res.ID = p.jst.ID
	}
	view := func(r *retained) (string, budget.Info) {
		data, counts, _ := r.snapshot()
		return budget.Shape(data, counts, budget.Options{Policy: r.policy, Limits: p.s.cfg.Budget, Raw: p.s.cfg.RawOutput})
	}
	res.Stdout, res.StdoutInfo = view(p.out)
	res.Stderr, res.StderrInfo = view(p.err)
	if p.screen != nil {
		var note string
		res.Stdout, res.StdoutInfo, note = p.screenView(res.Stdout, res.StdoutInfo)
		res.Stderr = withNote(res.Stderr, note)
	}
	res.Truncated = res.StdoutInfo.Truncated || res.StderrInfo.Truncated
	j.cursorMu.Lock()
	j.cursor = [2]int64{res.StdoutInfo.TotalBytes, res.StderrInfo.TotalBytes}
	j.cursorMu.Unlock()
	if w != nil {
		res.Stderr = withNote(res.Stderr, fmt.Sprintf("[corral: %s; it goes on as background job %s "+
			"until it ends or its timeout of %s passes. Answer with job input (its stdin), read what it prints "+
			"next with job output, or kill it.]", w.Describe(), j.id, seconds(p.v.timeout)))
		return res
	}
	res.Stderr = withNote(res.Stderr, fmt.Sprintf("[corral: still running after %s; it goes on as background job %s "+
		"until it ends or its timeout of %s passes. Read what it prints next with job output (no cursor needed), "+
		"wait for its result, or kill it.]", seconds(yielded), j.id, seconds(p.v.timeout)))
	return res
}

// Yield waits up to yield (more than 0, at most the longest timeout) for
// job id to end or, for an interactive or terminal job, to wait for input
// (docs/terminals.md), as a yielding command does. It returns the job's
// Result when it ended; else a running Result (Running, JobID, Waiting when
// it waits) with the views of everything it printed so far, the screen for
// a full-screen program, as a yielding command's Result; the job's
// cursorless reads then start after what these views counted. Errors as
// Get's, or ctx's.
func (h *Jobs) Yield(ctx context.Context, id string, yield time.Duration) (Result, error) {
	j, err := h.s.jobs.get(id)
	if err != nil {
		return Result{}, err
	}
	if yield <= 0 || yield > h.s.maxTimeout {
		return Result{}, invalid("yield must be more than 0 and at most %g seconds, got %g",
			h.s.maxTimeout.Seconds(), yield.Seconds())
	}
	timer := time.NewTimer(yield)
	defer timer.Stop()
	for {
		woken := j.waiter()
		if res, ended := j.exited(); ended {
			return *res, nil
		}
		var w *Waiting
		if j.watch != nil {
			if w, _ = j.currentWait(); w != nil {
				return h.s.yielded(j, w, yield)
			}
		}
		select {
		case <-j.done:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-timer.C:
			return h.s.yielded(j, nil, yield)
		case <-woken:
		}
	}
}

// yielded is the running Result of job j at a Yield (w: it waits for
// input), or its Result when it ended meanwhile.
func (s *Supervisor) yielded(j *job, w *Waiting, yield time.Duration) (Result, error) {
	j.mu.Lock()
	p := j.proc
	j.mu.Unlock()
	if p == nil {
		<-j.done
		res, _ := j.exited()
		return *res, nil
	}
	return p.soFar(j, w, yield), nil
}

// gate passes events to cb until it is closed; close waits for a callback
// in progress, so none runs after it returns.
// A nil *gate does nothing.
type gate struct {
	mu     sync.Mutex
	cb     func(Event)
	closed bool // guarded by mu
	result bool // a result event went through; guarded by mu
	waited bool // a waiting event went through; guarded by mu
}

func (g *gate) call(ev Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.result = g.result || ev.Event == EventResult
		g.waited = g.waited || ev.Event == EventWaiting
		g.cb(ev)
	}
}

func (g *gate) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// deliverWaiting gives the closed gate's callback the waiting event of w,
// unless one already went through.
func (g *gate) deliverWaiting(w *Waiting) {
	if g == nil || g.waited {
		return
	}
	g.waited = true
	g.cb(Event{Event: EventWaiting, Waiting: w})
}

// deliver gives the closed gate's callback its result event, unless one
// already went through.
func (g *gate) deliver(res Result) {
	if g == nil || g.result {
		return
	}
	g.result = true
	g.cb(Event{Event: EventResult, Result: &res})
}
