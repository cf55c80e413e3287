package journal

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// pendingKey names an unfinished entry or batch in the pending bucket:
// session, NUL, then 'e' and the 8-byte seq, or 'b' and the batch ID.
type pendingKey []byte

func pendingEntryKey(session string, seq uint64) []byte {
	return append(append([]byte(session), 0, 'e'), u64(seq)...)
}

func pendingBatchKey(session, id string) []byte {
	return append(append([]byte(session), 0, 'b'), id...)
}

// init makes the pending bucket and remembers what an earlier process left
// unfinished, for Recover.
func (j *Journal) init() error {
	j.stale = nil
	err := j.tx(func(tx *bolt.Tx) error {
		p, err := tx.CreateBucketIfNotExists(bucketPending)
		if err != nil {
			return err
		}
		return p.ForEach(func(k, _ []byte) error {
			j.stale = append(j.stale, pendingKey(append([]byte(nil), k...)))
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("journal: open %s: %w", j.path, err)
	}
	return nil
}

// Unfinished counts the entries and batches an earlier process left
// unfinished and Recover has not completed yet.
func (j *Journal) Unfinished() int {
	j.staleMu.Lock()
	defer j.staleMu.Unlock()
	return len(j.stale)
}

// Recover completes what an earlier process started and never finished:
// each entry with the Result bytes complete returns for it (given the
// entry as started; its Result is nil), ended at now; each batch as
// Interrupted. Entries and batches started by this process are not
// touched. It returns how many entries it completed. Call it once, before
// serving; a second call finds nothing left.
func (j *Journal) Recover(now time.Time, complete func(Entry) (json.RawMessage, error)) (int, error) {
	j.staleMu.Lock()
	defer j.staleMu.Unlock()
	n := 0
	err := j.update(func(tx *bolt.Tx) error {
		n = 0
		for _, k := range j.stale {
			done, err := recoverOne(tx, k, now, complete)
			if err != nil {
				return err
			}
			if done {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("journal: recover: %w", err)
	}
	j.stale = nil
	return n, nil
}

// recoverOne completes one pending key; done reports an entry completed.
func recoverOne(tx *bolt.Tx, k pendingKey, now time.Time, complete func(Entry) (json.RawMessage, error)) (done bool, err error) {
	pending := tx.Bucket(bucketPending)
	if pending.Get(k) == nil {
		return false, nil // finished or deleted meanwhile
	}
	session, rest := splitPending(k)
	b := tx.Bucket([]byte(session))
	if b == nil || len(rest) < 1 {
		return false, pending.Delete(k)
	}
	if rest[0] == 'b' {
		bt, err := getBatch(tx, session, string(rest[1:]))
		if err != nil {
			return false, pending.Delete(k)
		}
		ended := now.UTC()
		bt.EndedAt, bt.Interrupted = &ended, true
		return false, putBatch(tx, bt)
	}
	seq := be64(rest[1:])
	v := b.Bucket(bucketEntries).Get(u64(seq))
	if v == nil {
		return false, pending.Delete(k)
	}
	var e Entry
	if err := json.Unmarshal(v, &e); err != nil {
		return false, fmt.Errorf("%w: entry %d of session %s: %v", errDamagedValue, seq, session, err)
	}
	e.Result = nil // null while it ran
	res, err := complete(e)
	if err != nil {
		return false, err
	}
	if !json.Valid(res) {
		return false, fmt.Errorf("entry %s: the completing result is not valid JSON", e.ID)
	}
	st := Started{Session: session, Seq: seq, ID: e.ID, Command: e.Command, StartedAt: e.StartedAt}
	if err := entries(b).Put(u64(seq), encodeEntry(st, &now, res)); err != nil {
		return false, err
	}
	return true, pending.Delete(k)
}

func splitPending(k pendingKey) (string, []byte) {
	for i, c := range k {
		if c == 0 {
			return string(k[:i]), k[i+1:]
		}
	}
	return string(k), nil
}
