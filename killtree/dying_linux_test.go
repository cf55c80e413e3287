package killtree

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// scripted is a containment whose membership follows a script: each look
// (procs) takes the next count of seq, the last one repeating, until a kill
// empties it. It counts the kills.
type scripted struct {
	mu    sync.Mutex
	seq   []int // guarded by mu
	looks int   // guarded by mu
	kills int   // guarded by mu
}

// noPid is above the kernel's largest PID (PID_MAX_LIMIT, 2^22): no
// process, no /proc entry, nothing to thaw or reap.
const noPid = 1<<22 + 1

func (s *scripted) count() int {
	if s.looks < len(s.seq) {
		return s.seq[s.looks]
	}
	return s.seq[len(s.seq)-1]
}

func (s *scripted) procs() ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.count()
	s.looks++
	pids := make([]int, n)
	for i := range pids {
		pids[i] = noPid + i
	}
	return pids, nil
}

func (s *scripted) kill(time.Time) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kills++
	s.seq, s.looks = []int{0}, 0
	return nil, nil
}

func (s *scripted) waitEmpty(ctx context.Context) error {
	s.mu.Lock()
	empty := s.count() == 0
	s.mu.Unlock()
	if empty {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *scripted) start(*exec.Cmd) error { return nil }
func (s *scripted) pause(bool) error      { return nil }
func (s *scripted) destroy() error        { return nil }
func (s *scripted) dirs() []string        { return nil }

// TestWaitContainmentWhileDying: after the blow, a containment that shrinks
// from one look to the next is left to die without a second kill (a large
// tree takes hundreds of milliseconds to exit on a small machine, and the
// thaw's reads and the second kill would take CPU from those exits); one
// that stops shrinking is killed again at the next look.
func TestWaitContainmentWhileDying(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	tier := TierCgroup2
	if !tierWorks(safety.Name(), tier) {
		tier = TierCgroup1
	}
	if !tierWorks(safety.Name(), tier) {
		t.Skip("no cgroup tier works here (the stale sweep needs one)")
	}
	m, err := New(Config{Tier: tier, CgroupParent: safety.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, tc := range []struct {
		name      string
		seq       []int // the containment's count at each look after the blow, which listed 100
		wantKills int
	}{
		// Shrinking at every look until empty: never killed again.
		{"dying", []int{80, 50, 20, 5, 0}, 0},
		// Shrinks, then stops at 3 (a member outlived SIGKILL): killed again once.
		{"stuck", []int{60, 3, 3}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{seq: tc.seq}
			tr := &Tree{m: m, c: s, pid: noPid, st: treeState{dead: map[int]bool{}}}
			if err := tr.waitContainment(time.Now().Add(10*time.Second), 100); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.kills != tc.wantKills {
				t.Errorf("killed again %d times, want %d", s.kills, tc.wantKills)
			}
		})
	}
}
