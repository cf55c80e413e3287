package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Entry is one journaled command, as stored. EndedAt is nil and Result is
// null while the command runs.
type Entry struct {
	ID        string          `json:"id"`
	Session   string          `json:"session"`
	Seq       uint64          `json:"seq"`
	Command   string          `json:"command"`
	StartedAt time.Time       `json:"startedAt"`
	EndedAt   *time.Time      `json:"endedAt,omitempty"`
	Result    json.RawMessage `json:"result"`
}

// Started is an entry written as started, to be completed by Finish.
type Started struct {
	Session   string
	Seq       uint64
	ID        string // "r-<token>-<seq>"
	Command   string
	StartedAt time.Time
}

// Start writes an entry for a command about to run, with the next seq of
// its session (creating the session), and trims the session to
// Options.MaxEntries. It returns once the entry is synced.
func (j *Journal) Start(session, command string, at time.Time) (Started, error) {
	if err := validSession(session); err != nil {
		return Started{}, err
	}
	var st Started
	err := j.update(func(tx *bolt.Tx) error {
		b, err := sessionBucket(tx, session, at, true)
		if err != nil {
			return err
		}
		seq := getUint(b, keyNext) + 1
		st = Started{Session: session, Seq: seq, ID: entryID(b, seq), Command: command, StartedAt: at}
		if err := putUint(b, keyNext, seq); err != nil {
			return err
		}
		if err := entries(b).Put(u64(seq), encodeEntry(st, nil, nil)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPending).Put(pendingEntryKey(session, seq), nil); err != nil {
			return err
		}
		return j.trim(tx, b, session)
	})
	if err != nil {
		return Started{}, fmt.Errorf("journal: start an entry in session %s: %w", session, err)
	}
	return st, nil
}

// Finish completes a started entry with result (a JSON value, stored
// verbatim) and, when cwd is not "", records cwd as the session's working
// directory. It returns once synced. Errors: ErrNotFound when the session
// was deleted or the entry trimmed meanwhile, ErrFinished when it was
// completed already.
func (j *Journal) Finish(st Started, at time.Time, result json.RawMessage, cwd string) error {
	if !json.Valid(result) {
		return fmt.Errorf("journal: finish %s: the result is not valid JSON", st.ID)
	}
	err := j.update(func(tx *bolt.Tx) error {
		return j.finish(tx, st, at, result, cwd)
	})
	if err != nil {
		return fmt.Errorf("journal: finish %s in session %s: %w", st.ID, st.Session, err)
	}
	return nil
}

func (j *Journal) finish(tx *bolt.Tx, st Started, at time.Time, result []byte, cwd string) error {
	b := tx.Bucket([]byte(st.Session))
	if b == nil || entryID(b, st.Seq) != st.ID {
		return ErrNotFound
	}
	key := pendingEntryKey(st.Session, st.Seq)
	pending := tx.Bucket(bucketPending)
	if pending.Get(key) == nil {
		if b.Bucket(bucketEntries).Get(u64(st.Seq)) == nil {
			return ErrNotFound
		}
		return ErrFinished
	}
	if err := entries(b).Put(u64(st.Seq), encodeEntry(st, &at, result)); err != nil {
		return err
	}
	if err := pending.Delete(key); err != nil {
		return err
	}
	if cwd != "" {
		if err := b.Put(keyCwd, []byte(cwd)); err != nil {
			return err
		}
	}
	return putTime(b, keyUsed, at)
}

// encodeEntry renders an entry. The result is spliced in verbatim (no
// re-encoding, no HTML escaping), so the bytes Finish was given are the
// bytes Get returns inside the entry.
func encodeEntry(st Started, ended *time.Time, result []byte) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(struct {
		ID        string     `json:"id"`
		Session   string     `json:"session"`
		Seq       uint64     `json:"seq"`
		Command   string     `json:"command"`
		StartedAt time.Time  `json:"startedAt"`
		EndedAt   *time.Time `json:"endedAt,omitempty"`
	}{st.ID, st.Session, st.Seq, st.Command, st.StartedAt.UTC(), utc(ended)})
	head := bytes.TrimRight(buf.Bytes(), "\n}")
	out := make([]byte, 0, len(head)+len(result)+16)
	out = append(out, head...)
	out = append(out, `,"result":`...)
	if result == nil {
		out = append(out, "null"...)
	} else {
		out = append(out, result...)
	}
	return append(out, '}')
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Get returns an entry's stored bytes, identical on every call (and across
// restarts once the entry is finished). ErrNotFound for an unknown session
// or ID.
func (j *Journal) Get(session, id string) ([]byte, error) {
	if err := validSession(session); err != nil {
		return nil, err
	}
	var out []byte
	err := j.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(session))
		if b == nil {
			return fmt.Errorf("%w: session %s", ErrNotFound, session)
		}
		seq, ok := parseID(b, "r-", id)
		var v []byte
		if ok {
			v = b.Bucket(bucketEntries).Get(u64(seq))
		}
		if v == nil {
			return fmt.Errorf("%w: result %s in session %s", ErrNotFound, id, session)
		}
		if !json.Valid(v) {
			return fmt.Errorf("%w: entry %s of session %s", errDamagedValue, id, session)
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

// Entry returns an entry decoded; its Result holds the stored bytes.
func (j *Journal) Entry(session, id string) (Entry, error) {
	raw, err := j.Get(session, id)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return Entry{}, fmt.Errorf("journal: entry %s: %w", id, err)
	}
	return e, nil
}

// MaxList is the most entries one List returns.
const MaxList = 1000

// List returns the stored bytes of up to limit entries (1–MaxList) of a
// session with a seq above after, in seq order, and next: the seq of the
// last one returned (after when none is). ErrNotFound for an unknown
// session.
func (j *Journal) List(session string, after uint64, limit int) (entries [][]byte, next uint64, err error) {
	if err := validSession(session); err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > MaxList {
		return nil, 0, fmt.Errorf("journal: limit must be between 1 and %d, got %d", MaxList, limit)
	}
	next = after
	err = j.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(session))
		if b == nil {
			return fmt.Errorf("%w: session %s", ErrNotFound, session)
		}
		c := b.Bucket(bucketEntries).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil && len(entries) < limit; k, v = c.Next() {
			if !json.Valid(v) {
				return fmt.Errorf("%w: entry %d of session %s", errDamagedValue, be64(k), session)
			}
			entries = append(entries, bytes.Clone(v))
			next = be64(k)
		}
		return nil
	})
	return entries, next, err
}
