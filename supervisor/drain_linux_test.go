package supervisor

import (
	"os/exec"
	"testing"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/killtree"
)

// TestDrainForcedIsReported: when the pipes never reach EOF (their write
// ends held here, by a process the pipe-holder scan never kills: its own),
// drainAll stops reading and the Result's KillInfo says so; when they do
// reach EOF it does not.
func TestDrainForcedIsReported(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Containment: killtree.Config{Tier: killtree.TierPgroup}})
	for _, hold := range []bool{true, false} {
		tree, err := s.trees.Start(exec.Command("true"))
		if err != nil {
			t.Fatal(err)
		}
		p := &proc{s: s, log: s.log, tree: tree, drained: make(chan error, 2)}
		p.out = newRetained(budget.PolicyHead, s.cfg.Capture, &s.drained, nil, nil)
		p.err = newRetained(budget.PolicyTail, s.cfg.Capture, &s.drained, nil, nil)
		wo, we, err := p.outs.open()
		if err != nil {
			t.Fatal(err)
		}
		p.outs.watch(p)
		wo.Write([]byte("out\n"))
		if !hold {
			wo.Close()
			we.Close()
		}
		p.handOff()
		p.drainAll(endExited, time.Now().Add(300*time.Millisecond), false)
		if p.kill.PipesForced != hold {
			t.Errorf("write ends held %v: PipesForced %v", hold, p.kill.PipesForced)
		}
		wo.Close()
		we.Close()
		p.outs.close()
		tree.Kill()
		tree.Close()
	}
}
