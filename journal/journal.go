package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterr "go.etcd.io/bbolt/errors"
)

// Defaults for Options.
const (
	DefaultMaxEntries  = 10000
	DefaultRetention   = 7 * 24 * time.Hour
	DefaultLockTimeout = time.Second
	// FileName is the store's file inside <dataDir>/journal/.
	FileName = "journal.db"
)

// Errors callers branch on.
var (
	// ErrNotFound: no such session, entry or batch.
	ErrNotFound = errors.New("journal: not found")
	// ErrInvalidSession wraps a session ID against the spill-name rules.
	ErrInvalidSession = errors.New("journal: invalid session")
	// ErrLocked: another process holds the store.
	ErrLocked = errors.New("journal: the store is in use by another process")
	// ErrClosed: the Journal was closed.
	ErrClosed = errors.New("journal: closed")
	// ErrFinished: the entry or batch was already completed.
	ErrFinished = errors.New("journal: already finished")
)

// CorruptError reports a store file that cannot be trusted.
type CorruptError struct {
	Path string
	Err  error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: %s is corrupt or truncated (%v); corral will not start on it. "+
		"Move it aside to start with an empty journal (mv %s %s.corrupt) and keep the copy for inspection",
		e.Path, e.Err, e.Path, e.Path)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Options configures a Journal; the zero value takes the defaults.
type Options struct {
	// MaxEntries is how many entries a session keeps (its newest); 0 is
	// DefaultMaxEntries.
	MaxEntries int
	// Retention is how long a session may stay idle before Sweep deletes
	// it; 0 is DefaultRetention.
	Retention time.Duration
	// LockTimeout bounds the wait for the store's file lock; 0 is
	// DefaultLockTimeout.
	LockTimeout time.Duration
}

// Journal is an open store. Safe for concurrent use.
type Journal struct {
	db   *bolt.DB
	path string
	opts Options

	mu     sync.RWMutex // held for reading by every write's enqueue, for writing by Close
	closed bool         // guarded by mu
	ops    chan *op     // the committer's queue; closed by Close
	done   chan struct{}

	staleMu sync.Mutex
	stale   []pendingKey // unfinished at Open; guarded by staleMu

	fault atomic.Pointer[offlineError] // the storage fault that took it offline (fault.go)
}

// Open opens (creating if missing) the store in <dataDir>/journal/.
func Open(dataDir string, opts Options) (*Journal, error) {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	dir := filepath.Join(dataDir, "journal")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := openDB(path, opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	j := &Journal{db: db, path: path, opts: opts, ops: make(chan *op, 256), done: make(chan struct{})}
	if err := j.init(); err != nil {
		db.Close()
		return nil, err
	}
	go j.commitLoop()
	return j, nil
}

// openDB opens the bbolt file, turning its failures into ErrLocked or a
// CorruptError. Between taking the file's lock and mapping it, bbolt
// calls openFile, which reads the whole file once (verify): bbolt itself
// checks only its meta pages.
func openDB(path string, timeout time.Duration) (_ *bolt.DB, retErr error) {
	defer func() {
		// bbolt panics on some damaged pages rather than returning an error.
		if r := recover(); r != nil {
			retErr = &CorruptError{Path: path, Err: fmt.Errorf("%v", r)}
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	openFile := func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		if err != nil {
			return nil, err
		}
		if err := lockFile(f, timeout); err != nil {
			f.Close()
			return nil, err
		}
		fi, err := f.Stat()
		if err == nil && fi.Size() > 0 { // an empty file is a new store
			if err = verify(f, fi.Size()); err != nil {
				err = &CorruptError{Path: path, Err: err}
			}
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistMapType, OpenFile: openFile})
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		return nil, ce
	case errors.Is(err, bolterr.ErrTimeout):
		return nil, fmt.Errorf("%w: %s is locked (is another corral serve using this data directory?)", ErrLocked, path)
	case errors.Is(err, bolterr.ErrInvalid), errors.Is(err, bolterr.ErrChecksum), errors.Is(err, bolterr.ErrVersionMismatch):
		return nil, &CorruptError{Path: path, Err: err}
	case err != nil:
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	return db, nil
}

// Close waits for the writes in flight and closes the store. Idempotent.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	close(j.ops)
	j.mu.Unlock()
	<-j.done
	return j.closeDB()
}

// Path is the store's file.
func (j *Journal) Path() string { return j.path }

// Options returns the options in effect (defaults filled in).
func (j *Journal) Options() Options { return j.opts }
