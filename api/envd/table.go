package envd

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/corral-sh/corral/api/envd/processpb"
	"github.com/corral-sh/corral/supervisor"
)

// process is one process started through the envd face.
type process struct {
	id      string // the corral job
	pid     uint32
	tag     string
	hasTag  bool
	config  *processpb.ProcessConfig
	started time.Time
	js      *supervisor.JobStream
}

func (p *process) running() bool {
	_, ended := p.js.Result()
	return !ended
}

// table holds the envd processes by pid: running ones, and exited ones
// while the supervisor still retains their job (a late Connect reads their
// output and end). Exited entries the supervisor forgot are dropped at the
// next add, so the table stays within the supervisor's job bounds.
type table struct {
	mu      sync.Mutex
	byPid   map[uint32]*process // guarded by mu
	pruneAt int                 // guarded by mu; prune once byPid holds this many
}

// minPrune is the table size below which add does not prune.
const minPrune = 64

func (t *table) init() { t.byPid = map[uint32]*process{} }

// add records p, replacing an exited process of the same pid. Once the
// table doubled since the last time, it drops what sup no longer retains,
// so the cost is amortised and the table stays within twice the jobs sup
// holds (and minPrune).
func (t *table) add(sup *supervisor.Supervisor, p *process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byPid[p.pid] = p
	if len(t.byPid) < max(t.pruneAt, minPrune) {
		return
	}
	for pid, q := range t.byPid {
		if !sup.Jobs().Has(q.id) {
			delete(t.byPid, pid)
		}
	}
	t.pruneAt = 2 * len(t.byPid)
}

// list returns the running processes, oldest first.
func (t *table) list() []*process {
	t.mu.Lock()
	out := make([]*process, 0, len(t.byPid))
	for _, p := range t.byPid {
		out = append(out, p)
	}
	t.mu.Unlock()
	out = deleteExited(out)
	sort.Slice(out, func(a, b int) bool { return out[a].started.Before(out[b].started) })
	return out
}

func deleteExited(ps []*process) []*process {
	n := 0
	for _, p := range ps {
		if p.running() {
			ps[n] = p
			n++
		}
	}
	return ps[:n]
}

// find resolves a selector: by pid, or by tag (the oldest running process
// with it, else the newest exited one). Unless exitedToo, only running
// processes match. The error is a Connect NotFound or InvalidArgument.
func (t *table) find(sel *processpb.ProcessSelector, exitedToo bool) (*process, error) {
	if sel == nil || sel.GetSelector() == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is required (pid or tag)"))
	}
	t.mu.Lock()
	var found *process
	switch s := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		found = t.byPid[s.Pid]
	case *processpb.ProcessSelector_Tag:
		var exited *process
		for _, p := range t.byPid {
			if !p.hasTag || p.tag != s.Tag {
				continue
			}
			if p.running() {
				if found == nil || p.started.Before(found.started) {
					found = p
				}
			} else if exited == nil || p.started.After(exited.started) {
				exited = p
			}
		}
		if found == nil {
			found = exited
		}
	}
	t.mu.Unlock()
	if found != nil && (exitedToo || found.running()) {
		return found, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("%s not found", describe(sel)))
}

// describe names a selector as envd's errors do.
func describe(sel *processpb.ProcessSelector) string {
	if tag, ok := sel.GetSelector().(*processpb.ProcessSelector_Tag); ok {
		return fmt.Sprintf("process with tag %q", tag.Tag)
	}
	return fmt.Sprintf("process with pid %d", sel.GetPid())
}
