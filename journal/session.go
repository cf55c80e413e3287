package journal

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/corral-sh/corral/spill"
)

// Bucket and key names. A session's bucket holds the keys and the two
// sub-buckets; the pending bucket's name cannot be a session ID (':').
var (
	bucketPending = []byte("corral:pending")
	bucketEntries = []byte("e")
	bucketBatches = []byte("b")
	keyToken      = []byte("token")
	keyNext       = []byte("next")
	keyNextBatch  = []byte("nextBatch")
	keyCreated    = []byte("created")
	keyUsed       = []byte("used")
	keyCwd        = []byte("cwd")
)

// SessionInfo describes a journaled session.
type SessionInfo struct {
	ID         string    `json:"id"`
	Cwd        string    `json:"cwd"`     // "" until a command recorded one
	Results    int       `json:"results"` // entries kept
	LastSeq    uint64    `json:"lastSeq"` // the newest entry's seq; 0 before the first
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt"`
}

func validSession(id string) error {
	if err := spill.ValidateName("session", id); err != nil {
		return fmt.Errorf("%w: %q %s", ErrInvalidSession, id, spill.NameRule)
	}
	return nil
}

// sessionBucket returns the session's bucket, making it when create is set
// (nil, nil when absent and not made), and marks it used at at.
func sessionBucket(tx *bolt.Tx, id string, at time.Time, create bool) (*bolt.Bucket, error) {
	b := tx.Bucket([]byte(id))
	if b == nil {
		if !create {
			return nil, nil
		}
		var err error
		if b, err = tx.CreateBucket([]byte(id)); err != nil {
			return nil, err
		}
		var tok [4]byte
		rand.Read(tok[:])
		for _, err := range []error{
			b.Put(keyToken, []byte(hex.EncodeToString(tok[:]))),
			putTime(b, keyCreated, at),
			errOnly(b.CreateBucket(bucketEntries)),
			errOnly(b.CreateBucket(bucketBatches)),
		} {
			if err != nil {
				return nil, err
			}
		}
	}
	return b, putTime(b, keyUsed, at)
}

// entries is the session's entries bucket, filled for appending: keys only
// grow, so a split page is left full rather than half full (bbolt's
// default), which would double the store's size.
func entries(b *bolt.Bucket) *bolt.Bucket {
	e := b.Bucket(bucketEntries)
	e.FillPercent = 1
	return e
}

func errOnly[T any](_ T, err error) error { return err }

func entryID(b *bolt.Bucket, seq uint64) string {
	return "r-" + string(b.Get(keyToken)) + "-" + strconv.FormatUint(seq, 10)
}

func batchID(b *bolt.Bucket, n uint64) string {
	return "b-" + string(b.Get(keyToken)) + "-" + strconv.FormatUint(n, 10)
}

// parseID returns the number of an ID of this session's bucket.
func parseID(b *bolt.Bucket, prefix, id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, prefix+string(b.Get(keyToken))+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != rest {
		return 0, false
	}
	return n, true
}

// trim deletes the session's oldest entries past MaxEntries.
func (j *Journal) trim(tx *bolt.Tx, b *bolt.Bucket, session string) error {
	e := b.Bucket(bucketEntries)
	c := e.Cursor()
	first, _ := c.First()
	if first == nil {
		return nil
	}
	last := getUint(b, keyNext)
	for seq := be64(first); last-seq+1 > uint64(j.opts.MaxEntries); seq++ {
		if err := e.Delete(u64(seq)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPending).Delete(pendingEntryKey(session, seq)); err != nil {
			return err
		}
	}
	return nil
}

func info(id string, b *bolt.Bucket) SessionInfo {
	s := SessionInfo{ID: id, Cwd: string(b.Get(keyCwd)), CreatedAt: getTime(b, keyCreated), LastUsedAt: getTime(b, keyUsed),
		LastSeq: getUint(b, keyNext)}
	if first, _ := b.Bucket(bucketEntries).Cursor().First(); first != nil {
		s.Results = int(getUint(b, keyNext) - be64(first) + 1)
	}
	return s
}

// Sessions lists the journaled sessions, most recently used first.
func (j *Journal) Sessions() ([]SessionInfo, error) {
	var out []SessionInfo
	err := j.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if validSession(string(name)) == nil {
				out = append(out, info(string(name), b))
			}
			return nil
		})
	})
	slices.SortFunc(out, func(a, b SessionInfo) int { return b.LastUsedAt.Compare(a.LastUsedAt) })
	return out, err
}

// Session describes one session; ErrNotFound when it is not journaled.
func (j *Journal) Session(id string) (SessionInfo, error) {
	if err := validSession(id); err != nil {
		return SessionInfo{}, err
	}
	var out SessionInfo
	err := j.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(id))
		if b == nil {
			return fmt.Errorf("%w: session %s", ErrNotFound, id)
		}
		out = info(id, b)
		return nil
	})
	return out, err
}

// DeleteSession deletes a session with its entries and batches;
// ErrNotFound when it is not journaled. A Finish of one of its entries
// still running then fails with ErrNotFound.
func (j *Journal) DeleteSession(id string) error {
	if err := validSession(id); err != nil {
		return err
	}
	err := j.update(func(tx *bolt.Tx) error { return deleteSession(tx, id) })
	if err != nil {
		return fmt.Errorf("journal: delete session %s: %w", id, err)
	}
	return nil
}

func deleteSession(tx *bolt.Tx, id string) error {
	if err := tx.DeleteBucket([]byte(id)); err != nil {
		if errors.Is(err, bolt.ErrBucketNotFound) {
			return ErrNotFound
		}
		return err
	}
	c := tx.Bucket(bucketPending).Cursor()
	prefix := append([]byte(id), 0)
	for k, _ := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// Sweep deletes the sessions whose last use is older than
// Options.Retention before now, except those named in keep (sessions with
// something running), and returns the IDs it deleted.
func (j *Journal) Sweep(now time.Time, keep func(id string) bool) ([]string, error) {
	var old []string
	err := j.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			id := string(name)
			if validSession(id) == nil && now.Sub(getTime(b, keyUsed)) > j.opts.Retention && (keep == nil || !keep(id)) {
				old = append(old, id)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("journal: sweep: %w", err)
	}
	if len(old) == 0 {
		return nil, nil
	}
	var swept []string
	err = j.update(func(tx *bolt.Tx) error {
		swept = swept[:0]
		for _, id := range old {
			b := tx.Bucket([]byte(id))
			// Used since the scan: it stays.
			if b == nil || now.Sub(getTime(b, keyUsed)) <= j.opts.Retention {
				continue
			}
			if err := deleteSession(tx, id); err != nil {
				return err
			}
			swept = append(swept, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: sweep: %w", err)
	}
	return swept, nil
}

func u64(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

func be64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func getUint(b *bolt.Bucket, k []byte) uint64 { return be64(b.Get(k)) }

func putUint(b *bolt.Bucket, k []byte, n uint64) error { return b.Put(k, u64(n)) }

func putTime(b *bolt.Bucket, k []byte, t time.Time) error { return b.Put(k, u64(uint64(t.UnixNano()))) }

func getTime(b *bolt.Bucket, k []byte) time.Time {
	return time.Unix(0, int64(getUint(b, k))).UTC()
}
