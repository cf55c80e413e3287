package supervisor

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/killtree"
)

// The waiting half of supervise: which end comes first, the graceful stop,
// the drains, and the hand-off of a tree whose kill gave up.

// selectEnd waits for the tree's exit watcher, the deadline or the abort,
// while the drains run elsewhere.
func (p *proc) selectEnd(ctx context.Context, deadline time.Time) ending {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-p.tree.Exited():
		if p.s.closing.Load() {
			return endAborted // Close killed it (or it ended as Close began)
		}
		return endExited
	case <-timer.C:
		return endTimedOut
	case <-ctx.Done():
		return endAborted
	}
}

// graceful is the first phase of the way down: SIGTERM to every member and
// a grace period that ends as soon as the tree is empty, or as soon as ctx
// is cancelled if it was not yet (a timed-out command whose caller gives
// up, or a CLI that gets SIGTERM, goes straight to the kill).
func (p *proc) graceful(ctx context.Context) {
	if p.s.grace <= 0 {
		return
	}
	if ctx.Err() != nil {
		ctx = context.Background() // an abort: the grace is the abort's own
	}
	// The grace counts from here: Terminate's scan of a large tree is part
	// of it, not added to it. A cancel during it ends it.
	gctx, cancel := context.WithTimeout(ctx, p.s.grace)
	defer cancel()
	if n, err := p.tree.Terminate(); err != nil || n == 0 {
		return
	}
	p.sent = "SIGTERM"
	err := p.tree.WaitEmpty(gctx)
	p.log.Debug().Bool("emptied", err == nil).Msg("grace over")
}

// drainAll waits for both pipes to reach EOF. EOF proves that no writer is
// left; when it does not come, whoever still holds a write end escaped the
// containment and the pipe-holder scan kills it. It stops trying at by: a
// writer that cannot be killed is a survivor, and the drains are stopped.
// Holders killed after the shell exited by itself were left running by it.
// After a kill that gave up (gaveUp) the survivors may hold the pipes: the
// scan runs at once, and once even when by has passed.
func (p *proc) drainAll(end ending, by time.Time, gaveUp bool) {
	pending := p.pending
	wait := func(d time.Duration) {
		if pending == 0 {
			return
		}
		t := time.NewTimer(max(0, min(d, time.Until(by))))
		defer t.Stop()
		for pending > 0 {
			select {
			case err := <-p.drained:
				if err != nil {
					p.log.Warn().Err(err).Msg("drain")
				}
				pending--
			case <-t.C:
				return
			}
		}
	}
	if !gaveUp {
		wait(drainWait)
	}
	if pending == 0 {
		p.log.Debug().Msg("pipes at EOF")
	}
	for round := 0; pending > 0 && round < 5 && (round == 0 || time.Now().Before(by)); round++ {
		n, err := p.tree.KillPipeHoldersBy(time.Now().Add(scanLimit))
		if err != nil {
			p.log.Warn().Err(err).Msg("pipe-holder scan")
		}
		p.kill.Escapees += n
		p.kill.Processes += n
		if end == endExited {
			p.kill.Lingering += n
		}
		p.log.Warn().Int("escapees", n).Msg("pipes still open after the kill")
		wait(drainWait)
	}
	if pending > 0 {
		// Nothing found holds the pipes, yet they stay open: stop reading
		// rather than hang. Logged as a containment failure, and the Result
		// says its output may be incomplete.
		p.log.Error().Msg("pipes never reached EOF; closing them")
		p.kill.PipesForced = true
		p.stopDrains()
		for ; pending > 0; pending-- {
			<-p.drained // their next read fails at once: the deadline passed
		}
	}
}

// finishLater goes on killing a tree whose way down gave up, in the
// background, with killtree's own deadline (30 s), and then closes it: the
// Result does not wait, but what can still be killed (a tree too large for
// the bounded way down, a survivor thawed meanwhile) is. Close waits for it.
func (s *Supervisor) finishLater(tree *killtree.Tree, log zerolog.Logger) {
	s.later.Add(1)
	go func() {
		defer s.later.Done()
		if _, err := tree.Kill(); err != nil {
			log.Warn().Err(err).Msg("background kill")
		}
		if err := tree.Close(); err != nil {
			log.Warn().Err(err).Msg("close containment")
		}
	}()
}
