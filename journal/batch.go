package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Batch is one journaled batch: the IDs of its entries in request order
// and, once it ended, View: bytes its caller chose (for the supervisor, the
// batch's JSON without its results), returned verbatim by [Journal.Batch].
// A batch its process never ended is completed at the next start with
// Interrupted set and no View.
type Batch struct {
	ID          string          `json:"id"` // "b-<token>-<n>"
	Session     string          `json:"session"`
	ResultIDs   []string        `json:"resultIds"`
	StartedAt   time.Time       `json:"startedAt"`
	EndedAt     *time.Time      `json:"endedAt,omitempty"`
	Interrupted bool            `json:"interrupted,omitempty"`
	View        json.RawMessage `json:"view,omitempty"`
}

// StartBatch writes a batch as started, with the IDs of its entries
// (started with Start before; they may finish in any order). It returns
// once synced.
func (j *Journal) StartBatch(session string, resultIDs []string, at time.Time) (Batch, error) {
	if err := validSession(session); err != nil {
		return Batch{}, err
	}
	var bt Batch
	err := j.update(func(tx *bolt.Tx) error {
		b, err := sessionBucket(tx, session, at, true)
		if err != nil {
			return err
		}
		n := getUint(b, keyNextBatch) + 1
		if err := putUint(b, keyNextBatch, n); err != nil {
			return err
		}
		bt = Batch{ID: batchID(b, n), Session: session, ResultIDs: resultIDs, StartedAt: at.UTC()}
		if err := b.Bucket(bucketBatches).Put([]byte(bt.ID), encodeBatch(bt)); err != nil {
			return err
		}
		return tx.Bucket(bucketPending).Put(pendingBatchKey(session, bt.ID), nil)
	})
	if err != nil {
		return Batch{}, fmt.Errorf("journal: start a batch in session %s: %w", session, err)
	}
	return bt, nil
}

// EndBatch completes a started batch with view, a JSON value stored
// verbatim. It returns once synced; ErrNotFound when the session or batch
// is gone, ErrFinished when the batch was completed already.
func (j *Journal) EndBatch(session, id string, at time.Time, view json.RawMessage) error {
	if !json.Valid(view) {
		return fmt.Errorf("journal: end batch %s: the view is not valid JSON", id)
	}
	err := j.update(func(tx *bolt.Tx) error {
		bt, err := getBatch(tx, session, id)
		if err != nil {
			return err
		}
		if bt.EndedAt != nil {
			return ErrFinished
		}
		ended := at.UTC()
		bt.EndedAt, bt.View = &ended, view
		return putBatch(tx, bt)
	})
	if err != nil {
		return fmt.Errorf("journal: end batch %s in session %s: %w", id, session, err)
	}
	return nil
}

func putBatch(tx *bolt.Tx, bt Batch) error {
	b := tx.Bucket([]byte(bt.Session))
	if err := b.Bucket(bucketBatches).Put([]byte(bt.ID), encodeBatch(bt)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketPending).Delete(pendingBatchKey(bt.Session, bt.ID)); err != nil {
		return err
	}
	return putTime(b, keyUsed, *bt.EndedAt)
}

// Batch returns a batch; ErrNotFound for an unknown session or ID.
func (j *Journal) Batch(session, id string) (Batch, error) {
	if err := validSession(session); err != nil {
		return Batch{}, err
	}
	var bt Batch
	err := j.view(func(tx *bolt.Tx) error {
		var err error
		bt, err = getBatch(tx, session, id)
		return err
	})
	return bt, err
}

func getBatch(tx *bolt.Tx, session, id string) (Batch, error) {
	b := tx.Bucket([]byte(session))
	if b == nil {
		return Batch{}, fmt.Errorf("%w: session %s", ErrNotFound, session)
	}
	v := b.Bucket(bucketBatches).Get([]byte(id))
	if v == nil {
		return Batch{}, fmt.Errorf("%w: batch %s in session %s", ErrNotFound, id, session)
	}
	var bt Batch
	if err := json.Unmarshal(v, &bt); err != nil {
		return Batch{}, fmt.Errorf("%w: batch %s of session %s: %v", errDamagedValue, id, session, err)
	}
	bt.View = bytes.Clone(bt.View)
	return bt, nil
}

func encodeBatch(bt Batch) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(bt)
	return bytes.TrimRight(buf.Bytes(), "\n")
}
