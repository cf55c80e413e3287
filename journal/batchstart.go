package journal

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// StartBatchEntries writes, in one synced commit, an entry as started for
// each of commands (consecutive seqs, in order) and then the batch record
// with their IDs: Start for each and StartBatch, without paying one sync
// per command. It trims the session to Options.MaxEntries afterwards (a
// batch larger than that loses its first entries at once).
func (j *Journal) StartBatchEntries(session string, commands []string, at time.Time) ([]Started, Batch, error) {
	if err := validSession(session); err != nil {
		return nil, Batch{}, err
	}
	var (
		sts []Started
		bt  Batch
	)
	err := j.update(func(tx *bolt.Tx) error {
		sts, bt = sts[:0], Batch{} // update may run this more than once
		b, err := sessionBucket(tx, session, at, true)
		if err != nil {
			return err
		}
		ids := make([]string, len(commands))
		for i, command := range commands {
			seq := getUint(b, keyNext) + 1
			st := Started{Session: session, Seq: seq, ID: entryID(b, seq), Command: command, StartedAt: at}
			if err := putUint(b, keyNext, seq); err != nil {
				return err
			}
			if err := b.Bucket(bucketEntries).Put(u64(seq), encodeEntry(st, nil, nil)); err != nil {
				return err
			}
			if err := tx.Bucket(bucketPending).Put(pendingEntryKey(session, seq), nil); err != nil {
				return err
			}
			sts, ids[i] = append(sts, st), st.ID
		}
		if err := j.trim(tx, b, session); err != nil {
			return err
		}
		n := getUint(b, keyNextBatch) + 1
		if err := putUint(b, keyNextBatch, n); err != nil {
			return err
		}
		bt = Batch{ID: batchID(b, n), Session: session, ResultIDs: ids, StartedAt: at.UTC()}
		if err := b.Bucket(bucketBatches).Put([]byte(bt.ID), encodeBatch(bt)); err != nil {
			return err
		}
		return tx.Bucket(bucketPending).Put(pendingBatchKey(session, bt.ID), nil)
	})
	if err != nil {
		return nil, Batch{}, fmt.Errorf("journal: start a batch in session %s: %w", session, err)
	}
	return sts, bt, nil
}
