package spill

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// sessionLocks orders writes against removal, per (data directory, session).
// Writers hold the read side, so they never wait for each other; Sweep and
// RemoveSession hold the write side. Striping keeps the table bounded no
// matter how many sessions come and go; two sessions sharing a stripe only
// wait a little longer.
var sessionLocks [64]sync.RWMutex

// sessionLock returns the lock guarding session's directory under dataDir.
func sessionLock(dataDir, session string) *sync.RWMutex {
	h := fnv.New32a()
	h.Write([]byte(dataDir))
	h.Write([]byte{0})
	h.Write([]byte(session))
	return &sessionLocks[h.Sum32()%uint32(len(sessionLocks))]
}

// RemoveSession removes the session's directory and everything in it. A
// missing directory is not an error. It waits for writes to that session in
// progress and is safe while other sessions write; a later Write to the same
// session starts a fresh directory.
func (s *Store) RemoveSession(session string) error {
	if err := ValidateName("session", session); err != nil {
		return err
	}
	mu := sessionLock(s.dataDir, session)
	mu.Lock()
	defer mu.Unlock()
	if err := s.root.RemoveAll(filepath.Join("scratch", session)); err != nil {
		return fmt.Errorf("spill: remove session %s: %w", session, err)
	}
	return nil
}

// Sweep removes every session directory under <dataDir>/scratch whose newest
// file, searched recursively, was modified before Now minus retention (zero
// or negative retention means DefaultRetention). A session with no files at
// all ages by its directories' times instead. It returns the removed session
// IDs in sorted order and the errors met, joined; a failure on one session
// does not stop the others. Entries that are not directories or whose names
// are not valid session IDs are left alone, and symlinks are never followed.
//
// Each session is checked and removed while holding its lock, so a session
// written during the sweep survives it. Sweep and RemoveSession work beneath
// the data directory held open since New (os.Root): a component replaced by
// a symlink leading out is never followed out, so nothing outside the data
// directory is listed or removed. A missing scratch directory is not
// an error.
func (s *Store) Sweep(retention time.Duration) ([]string, error) {
	if retention <= 0 {
		retention = DefaultRetention
	}
	cutoff := s.now().Add(-retention)
	entries, err := fs.ReadDir(s.root.FS(), "scratch")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spill: sweep: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || ValidateName("session", e.Name()) != nil {
			continue
		}
		gone, err := s.sweepSession(e.Name(), cutoff)
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			removed = append(removed, e.Name())
		}
	}
	slices.Sort(removed)
	return removed, errors.Join(errs...)
}

// sweepSession removes session's directory if nothing in it is newer than
// cutoff, and reports whether it did.
func (s *Store) sweepSession(session string, cutoff time.Time) (bool, error) {
	mu := sessionLock(s.dataDir, session)
	mu.Lock()
	defer mu.Unlock()
	dir := "scratch/" + session
	newest, err := newestModTime(s.root.FS(), dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // removed since the listing
	}
	if err != nil {
		return false, fmt.Errorf("spill: sweep session %s: %w", session, err)
	}
	if !newest.Before(cutoff) {
		return false, nil
	}
	if err := s.root.RemoveAll(filepath.FromSlash(dir)); err != nil {
		return false, fmt.Errorf("spill: sweep session %s: %w", session, err)
	}
	return true, nil
}

// newestModTime returns the newest modification time of the spill files
// below root in fsys, or of its directories when it holds no files. A
// sidecar (.meta) ages with its spill file and is not counted. Symlinks are
// not followed (fs.WalkDir does not descend into them).
func newestModTime(fsys fs.FS, root string) (time.Time, error) {
	var newestFile, newestDir time.Time
	files := false
	err := fs.WalkDir(fsys, root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mt := info.ModTime()
		switch {
		case d.IsDir():
			if mt.After(newestDir) {
				newestDir = mt
			}
		case strings.HasSuffix(path, metaSuffix):
		default:
			files = true
			if mt.After(newestFile) {
				newestFile = mt
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	if files {
		return newestFile, nil
	}
	return newestDir, nil
}
