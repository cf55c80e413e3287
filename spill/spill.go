package spill

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultMaxBytes is the most data written to one spill file when
	// Options.MaxBytes is zero.
	DefaultMaxBytes = 512 << 10
	// DefaultRetention is the age past which Sweep removes a session's
	// directory when called with a zero retention.
	DefaultRetention = 7 * 24 * time.Hour
)

var (
	// ErrInvalidName is wrapped by every error about a malformed session ID or
	// label. The server maps it to INVALID_ARGUMENT.
	ErrInvalidName = errors.New("spill: invalid name")
	// ErrNotFound is wrapped by Resolve's errors: the path does not exist or
	// lies outside the data directory. The server maps it to NOT_FOUND.
	ErrNotFound = errors.New("spill: not found")
)

// maxNameLen is the longest session ID or label accepted.
const maxNameLen = 128

// maxCreateAttempts bounds how many taken names Write skips before giving up.
const maxCreateAttempts = 1000

// seq numbers spill files within the process, across all Stores.
var seq atomic.Uint64

// Options configures a Store. The zero value gives the defaults.
type Options struct {
	// MaxBytes caps the data written per file; zero or negative means
	// DefaultMaxBytes.
	MaxBytes int64
	// Now is the clock used for file names and Sweep's cutoff; nil means
	// time.Now. Tests set it.
	Now func() time.Time
}

// Store writes spill files under <dataDir>/scratch/<session>/tool-output/
// and reads them back. It holds the data directory open from New to Close
// and reaches every file through that descriptor, never by resolving the
// directory's path again: a data directory renamed or replaced after New
// (by a symlink to /, say) leaves the Store on the original directory, and
// nothing under it is reached through a symlink planted by a command. It is
// safe for concurrent use, and several Stores on the same data directory in
// one process coordinate with each other.
type Store struct {
	dataDir  string
	realDir  string   // dataDir with symlinks resolved at New, to accept that spelling too
	root     *os.Root // the data directory, held open since New
	dir      *os.File // the same directory, for the reads' descriptor-relative opens
	maxBytes int64
	now      func() time.Time
	closed   sync.Once
}

// New returns a Store rooted at dataDir, which is made absolute and
// cleaned. It creates dataDir (mode 0700) when it is missing and opens it;
// the session directories are created on a session's first spill only. The
// caller closes the Store.
func New(dataDir string, o Options) (*Store, error) {
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	s := &Store{dataDir: filepath.Clean(dataDir), maxBytes: o.MaxBytes, now: o.Now}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if s.now == nil {
		s.now = time.Now
	}
	if _, err := os.Stat(s.dataDir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("spill: data directory: %w", err)
		}
	}
	root, err := os.OpenRoot(s.dataDir)
	if err != nil {
		return nil, fmt.Errorf("spill: data directory: %w", err)
	}
	dir, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("spill: data directory: %w", err)
	}
	s.root, s.dir = root, dir
	s.realDir = s.dataDir
	if real, err := filepath.EvalSymlinks(s.dataDir); err == nil {
		s.realDir = real
	}
	return s, nil
}

// Close releases the data directory; reads and writes after Close fail.
// It is idempotent.
func (s *Store) Close() (err error) {
	s.closed.Do(func() { err = errors.Join(s.dir.Close(), s.root.Close()) })
	return err
}

// DataDir returns the absolute, cleaned data directory the Store writes under.
func (s *Store) DataDir() string { return s.dataDir }

// NameRule states what ValidateName accepts, as its errors say it.
const NameRule = "must be 1–128 characters of [A-Za-z0-9._-], not \".\" or \"..\""

// ValidateName reports whether name is an acceptable session ID or label:
// 1–128 characters of [A-Za-z0-9._-], neither "." nor "..". The error names
// kind (for example "session" or "label") and the value, and wraps
// ErrInvalidName.
func ValidateName(kind, name string) error {
	const rule = NameRule
	if len(name) == 0 || len(name) > maxNameLen || name == "." || name == ".." {
		return fmt.Errorf("%w: %s %q %s", ErrInvalidName, kind, name, rule)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("%w: %s %q %s", ErrInvalidName, kind, name, rule)
		}
	}
	return nil
}

// nameByte reports whether c may appear in a session ID or label.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// Write saves data as the whole of a stream: WriteStream with Head data.
func (s *Store) Write(session, label string, data []byte) (string, error) {
	return s.WriteStream(session, label, Stream{Head: data, TotalBytes: int64(len(data))})
}

// WriteStream saves at most MaxBytes of st to a new file
// <dataDir>/scratch/<session>/tool-output/<label>-<unix-ms>-<seq>.log,
// with its extent beside it in <name>.meta, and returns the file's absolute
// path. Over the cap it keeps the start of a head-only stream, the end of a
// tail-only one, and for both at most half the cap of the tail and the rest
// of the head. Files are created with O_EXCL and mode 0600; missing
// directories with mode 0700, all beneath the data directory held open
// since New. Errors wrap ErrInvalidName for a bad session or label; any I/O
// error is returned too, after removing what was written. Callers treat an
// error as "no spill sentence" and never fail the command because of it.
func (s *Store) WriteStream(session, label string, st Stream) (path string, err error) {
	if err := ValidateName("session", session); err != nil {
		return "", err
	}
	if err := ValidateName("label", label); err != nil {
		return "", err
	}
	st, ext := st.fit(s.maxBytes)

	// Shared with other writers, exclusive against Sweep and RemoveSession,
	// so a sweep never sees a session between its mkdir and its new file.
	mu := sessionLock(s.dataDir, session)
	mu.RLock()
	defer mu.RUnlock()

	f, rel, err := s.create(session, label)
	if err != nil {
		return "", err
	}
	path = filepath.Join(s.dataDir, rel)
	wrote := false
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("spill: write %s: %w", path, cerr)
		}
		if err != nil {
			// Best effort: a failed spill leaves nothing behind.
			_ = s.root.Remove(rel)
			if wrote {
				_ = s.root.Remove(rel + metaSuffix)
			}
			path = ""
		}
	}()
	if _, err := f.Write(st.Head); err != nil {
		return path, fmt.Errorf("spill: write %s: %w", path, err)
	}
	if _, err := f.Write(st.Tail); err != nil {
		return path, fmt.Errorf("spill: write %s: %w", path, err)
	}
	wrote = true
	if err := s.writeExtent(rel, ext); err != nil {
		return path, err
	}
	return path, nil
}

// create makes the session's tool-output directory if needed and opens a new
// file there with O_EXCL, skipping names that are already taken. It returns
// the file and its path relative to the data directory.
func (s *Store) create(session, label string) (*os.File, string, error) {
	dir := filepath.Join("scratch", session, "tool-output")
	if err := s.mkdirs("scratch", session, "tool-output"); err != nil {
		return nil, "", err
	}
	for range maxCreateAttempts {
		name := fmt.Sprintf("%s-%d-%d.log", label, s.now().UnixMilli(), seq.Add(1))
		rel := filepath.Join(dir, name)
		f, err := s.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // never overwrite: take the next seq
		}
		if err != nil {
			return nil, "", fmt.Errorf("spill: create %s: %w", filepath.Join(s.dataDir, rel), err)
		}
		// The umask may have cleared bits; the mode is a promise.
		if err := f.Chmod(0o600); err != nil {
			_ = f.Close()
			_ = s.root.Remove(rel)
			return nil, "", fmt.Errorf("spill: chmod %s: %w", filepath.Join(s.dataDir, rel), err)
		}
		return f, rel, nil
	}
	return nil, "", fmt.Errorf("spill: create in %s: %d names in a row already taken", filepath.Join(s.dataDir, dir), maxCreateAttempts)
}

// mkdirs creates each element below the data directory in turn, beneath
// the held descriptor, giving every directory it creates mode 0700
// regardless of the umask. Existing directories are left as they are.
func (s *Store) mkdirs(elems ...string) error {
	dir := ""
	for _, e := range elems {
		dir = filepath.Join(dir, e)
		err := s.root.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		// Through the new directory's descriptor: Root.Chmod follows a
		// symlink swapped in meanwhile (its documentation says so).
		d, err := s.root.Open(dir)
		if err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		err = d.Chmod(0o700)
		d.Close()
		if err != nil {
			return fmt.Errorf("spill: %w", err)
		}
	}
	return nil
}
