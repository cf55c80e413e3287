package spill

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// Store writes spill files under <dataDir>/scratch/<session>/tool-output/.
// A Store holds no open files and needs no closing. It is safe for
// concurrent use, and several Stores on the same data directory in one
// process coordinate with each other.
type Store struct {
	dataDir  string
	maxBytes int64
	now      func() time.Time
}

// New returns a Store rooted at dataDir, which is made absolute and cleaned.
// Nothing is created on disk until the first Write.
func New(dataDir string, o Options) *Store {
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
	return s
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

// sessionDir is the directory holding everything of one session.
func (s *Store) sessionDir(session string) string {
	return filepath.Join(s.dataDir, "scratch", session)
}

// Write saves at most MaxBytes of data to a new file
// <dataDir>/scratch/<session>/tool-output/<label>-<unix-ms>-<seq>.log and
// returns its absolute path. The file is created with O_EXCL and mode 0600;
// missing directories are created with mode 0700. Errors wrap ErrInvalidName
// for a bad session or label; any I/O error is returned too, after removing
// a partly written file. Callers treat an error as "no spill sentence" and
// never fail the command because of it.
func (s *Store) Write(session, label string, data []byte) (path string, err error) {
	if err := ValidateName("session", session); err != nil {
		return "", err
	}
	if err := ValidateName("label", label); err != nil {
		return "", err
	}
	if int64(len(data)) > s.maxBytes {
		data = data[:s.maxBytes]
	}

	// Shared with other writers, exclusive against Sweep and RemoveSession,
	// so a sweep never sees a session between its mkdir and its new file.
	mu := sessionLock(s.dataDir, session)
	mu.RLock()
	defer mu.RUnlock()

	f, path, err := s.create(session, label)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("spill: write %s: %w", path, cerr)
		}
		if err != nil {
			_ = os.Remove(path) // best effort: a failed spill leaves nothing behind
			path = ""
		}
	}()
	if _, err := f.Write(data); err != nil {
		return path, fmt.Errorf("spill: write %s: %w", path, err)
	}
	return path, nil
}

// create makes the session's tool-output directory if needed and opens a new
// file there with O_EXCL, skipping names that are already taken.
func (s *Store) create(session, label string) (*os.File, string, error) {
	dir := filepath.Join(s.sessionDir(session), "tool-output")
	if err := mkdirs(s.dataDir, "scratch", session, "tool-output"); err != nil {
		return nil, "", err
	}
	for range maxCreateAttempts {
		name := fmt.Sprintf("%s-%d-%d.log", label, s.now().UnixMilli(), seq.Add(1))
		path := filepath.Join(dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // never overwrite: take the next seq
		}
		if err != nil {
			return nil, "", fmt.Errorf("spill: create %s: %w", path, err)
		}
		// The umask may have cleared bits; the mode is a promise.
		if err := f.Chmod(0o600); err != nil {
			_ = f.Close()
			_ = os.Remove(path)
			return nil, "", fmt.Errorf("spill: chmod %s: %w", path, err)
		}
		return f, path, nil
	}
	return nil, "", fmt.Errorf("spill: create in %s: %d names in a row already taken", dir, maxCreateAttempts)
}

// mkdirs creates root (and its parents) and then each element below it in
// turn, giving every directory it creates mode 0700 regardless of the umask.
// Existing directories are left as they are.
func mkdirs(root string, elems ...string) error {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return fmt.Errorf("spill: %w", err)
		}
	}
	dir := root
	for _, e := range elems {
		dir = filepath.Join(dir, e)
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("spill: %w", err)
		}
	}
	return nil
}
