package journal

import (
	"errors"

	bolt "go.etcd.io/bbolt"
)

// maxGroup bounds the writes that share one commit.
const maxGroup = 128

// op is one write waiting for the committer.
type op struct {
	fn   func(tx *bolt.Tx) error
	done chan error // buffered 1
}

// update runs fn in a read-write transaction and returns once it is
// committed and synced. fn may run more than once (after a commit of a
// group failed, each write is retried alone, as bbolt's own DB.Batch does),
// so it must set its outputs anew on every run.
//
// Why not DB.Batch: it waits up to MaxBatchDelay for company before
// committing, which a lone caller (a sequential loop of commands) pays on
// every write. Here a single committer takes whatever is queued when it
// becomes free: a lone write commits at once, and writes that arrive during
// a commit share the next one.
func (j *Journal) update(fn func(tx *bolt.Tx) error) error {
	o := &op{fn: fn, done: make(chan error, 1)}
	j.mu.RLock()
	if j.closed {
		j.mu.RUnlock()
		return ErrClosed
	}
	j.ops <- o
	j.mu.RUnlock()
	return <-o.done
}

// commitLoop is the committer; Open starts it and Close waits for it.
func (j *Journal) commitLoop() {
	defer close(j.done)
	for o := range j.ops {
		group := []*op{o}
	more:
		for len(group) < maxGroup {
			select {
			case o, ok := <-j.ops:
				if !ok {
					break more
				}
				group = append(group, o)
			default:
				break more
			}
		}
		j.commit(group)
	}
}

// commit commits a group; after a storage fault (fault.go) each op gets
// the error that says the journal is offline.
func (j *Journal) commit(group []*op) {
	fns := make([]func(*bolt.Tx) error, len(group))
	for i, o := range group {
		fns[i] = o.fn
	}
	err := j.tx(fns...)
	if err == nil || len(group) == 1 || errors.Is(err, ErrOffline) {
		for _, o := range group {
			o.done <- err
		}
		return
	}
	for _, o := range group {
		o.done <- j.tx(o.fn)
	}
}
