package journal

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// layout checks the journal's own layout (doc.go) as verify's walk meets
// it: which buckets exist, the keys of a session bucket and the shape of
// their values, entries and batches as UTF-8 JSON objects, pending keys.
type layout struct {
	lastSeq uint64 // the seq of the last entry of the session being walked
}

func (c *layout) open(path [][]byte) error {
	switch len(path) {
	case 0:
		return nil
	case 1:
		c.lastSeq = 0
		if name := path[0]; !bytes.Equal(name, bucketPending) && validSession(string(name)) != nil {
			return fmt.Errorf("a top-level bucket named %q", name)
		}
		return nil
	case 2:
		if !bytes.Equal(path[0], bucketPending) && (bytes.Equal(path[1], bucketEntries) || bytes.Equal(path[1], bucketBatches)) {
			return nil
		}
	}
	return fmt.Errorf("a bucket at %q", path)
}

func (c *layout) close(path [][]byte) error { return nil }

// value checks the value v of key k in the bucket at path.
func (c *layout) value(path [][]byte, k, v []byte) error {
	switch {
	case len(path) == 1 && bytes.Equal(path[0], bucketPending):
		return pendingValue(k, v)
	case len(path) == 1:
		return c.sessionValue(k, v)
	case len(path) == 2 && bytes.Equal(path[1], bucketEntries):
		if len(k) != 8 {
			return fmt.Errorf("session %s: an entry key of %d bytes", path[0], len(k))
		}
		c.lastSeq = be64(k)
		return object(v, "entry", path[0])
	case len(path) == 2 && bytes.Equal(path[1], bucketBatches):
		if !bytes.HasPrefix(k, []byte("b-")) {
			return fmt.Errorf("session %s: a batch key %q", path[0], k)
		}
		return object(v, "batch", path[0])
	}
	return fmt.Errorf("a value at %q", path)
}

// sessionValue checks one of a session bucket's own keys. Its buckets "b"
// and "e" sort before "next", so lastSeq holds the session's last entry.
func (c *layout) sessionValue(k, v []byte) error {
	switch string(k) {
	case string(keyToken):
		if _, err := hex.DecodeString(string(v)); err != nil || len(v) != 8 {
			return fmt.Errorf("a session token %q", v)
		}
	case string(keyNext):
		if len(v) != 8 || be64(v) < c.lastSeq {
			return fmt.Errorf("next seq %x below the last entry %d", v, c.lastSeq)
		}
	case string(keyNextBatch), string(keyCreated), string(keyUsed):
		if len(v) != 8 {
			return fmt.Errorf("session key %s of %d bytes", k, len(v))
		}
	case string(keyCwd):
	default:
		return fmt.Errorf("a session key %q", k)
	}
	return nil
}

func pendingValue(k, v []byte) error {
	session, rest := splitPending(k)
	ok := validSession(session) == nil && len(v) == 0 && len(rest) > 1 &&
		(rest[0] == 'e' && len(rest) == 9 || rest[0] == 'b' && bytes.HasPrefix(rest[1:], []byte("b-")))
	if !ok {
		return fmt.Errorf("a pending key %q", k)
	}
	return nil
}

// object checks that v is UTF-8 framed as a JSON object: a full parse of
// every stored Result would cost a restart several times more (Get, List
// and Batch check the JSON of what they return).
func object(v []byte, what string, session []byte) error {
	if len(v) < 2 || v[0] != '{' || v[len(v)-1] != '}' || !utf8.Valid(v) {
		return fmt.Errorf("session %s: a damaged %s", session, what)
	}
	return nil
}
