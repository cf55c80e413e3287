package sandboxd

import (
	"sync"

	"github.com/corral-sh/corral/supervisor"
)

// process is one process started through Start: its client, its job and
// the job's stream.
type process struct {
	client int
	job    string
	js     *supervisor.JobStream
}

// table maps process ids to the processes whose Start stream is open. An
// entry lives exactly as long as its stream, so the table holds at most as
// many entries as there are running Start calls.
type table struct {
	mu   sync.Mutex
	next int32              // guarded by mu; the last id given
	byID map[int32]*process // guarded by mu
}

func (t *table) init() { t.byID = map[int32]*process{} }

// add records p under a new id and returns it. Ids count from 1; after
// 2^31-1 they wrap, skipping ids still in use, so none names two live
// processes.
func (t *table) add(p *process) int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		t.next++
		if t.next <= 0 {
			t.next = 1
		}
		if _, used := t.byID[t.next]; !used {
			t.byID[t.next] = p
			return t.next
		}
	}
}

// remove forgets id.
func (t *table) remove(id int32) {
	t.mu.Lock()
	delete(t.byID, id)
	t.mu.Unlock()
}

// find returns the process id of client c, or nil when there is none: no
// such id, its stream ended, or another client's.
func (t *table) find(c int, id int32) *process {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.byID[id]
	if p == nil || p.client != c {
		return nil
	}
	return p
}
