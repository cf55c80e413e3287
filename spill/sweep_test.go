package spill

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// age sets the access and modification times of every path to t.
func age(t *testing.T, when time.Time, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
}

// exists reports whether path is present (without following a last symlink).
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestSweep(t *testing.T) {
	t.Parallel()
	base := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	data := t.TempDir()
	s := newStore(t, data, Options{Now: fixedNow(base)})
	scratch := filepath.Join(data, "scratch")

	// session writes one file and gives it the age given.
	session := func(id string, ages ...time.Duration) string {
		t.Helper()
		for _, a := range ages {
			p, err := s.Write(id, "out", []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			age(t, base.Add(-a), p)
		}
		return filepath.Join(scratch, id)
	}
	old := session("old", 8*day, 10*day)                // every file past 7 days: removed
	fresh := session("fresh", time.Hour)                // new: kept
	mixed := session("mixed", 30*day, 6*day)            // newest file 6 days old: kept
	edge := session("edge", 7*day)                      // exactly at the cutoff: kept (not older)
	justPast := session("just-past", 7*day+time.Second) // a second past: removed

	// A newer file deep below an old session keeps it.
	deep := session("deep", 20*day)
	nested := filepath.Join(deep, "tool-output", "sub", "later.log")
	if err := os.MkdirAll(filepath.Dir(nested), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nested, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, base.Add(-time.Hour), nested)

	// A session dir with no files ages by its directories.
	emptyOld := filepath.Join(scratch, "empty-old")
	emptyNew := filepath.Join(scratch, "empty-new")
	for _, d := range []string{emptyOld, emptyNew} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	age(t, base.Add(-9*day), emptyOld)
	age(t, base.Add(-time.Minute), emptyNew)

	// Entries that are not sessions are left alone however old.
	badName := filepath.Join(scratch, "bad name")
	stray := filepath.Join(scratch, "stray-file")
	if err := os.Mkdir(badName, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, base.Add(-100*day), badName, stray)

	// A symlinked "session" pointing at an old directory outside is not
	// followed and its target survives.
	outside := t.TempDir()
	outsideFile := filepath.Join(outside, "keep.log")
	if err := os.WriteFile(outsideFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	age(t, base.Add(-100*day), outsideFile, outside)
	link := filepath.Join(scratch, "linked")
	haveLink := os.Symlink(outside, link) == nil

	removed, err := s.Sweep(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"empty-old", "just-past", "old"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	for _, p := range []string{old, justPast, emptyOld} {
		if exists(t, p) {
			t.Errorf("%s survived the sweep", p)
		}
	}
	for _, p := range []string{fresh, mixed, edge, deep, nested, emptyNew, badName, stray, outsideFile} {
		if !exists(t, p) {
			t.Errorf("%s was swept", p)
		}
	}
	if haveLink && !exists(t, link) {
		t.Errorf("symlink %s was swept", link)
	}

	// A shorter retention reaches further.
	removed, err = s.Sweep(2 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"edge", "mixed"}; !slices.Equal(removed, want) {
		t.Errorf("second sweep removed %q, want %q", removed, want)
	}
}

func TestSweepMissingScratch(t *testing.T) {
	t.Parallel()
	s := newStore(t, filepath.Join(t.TempDir(), "never-written"), Options{})
	removed, err := s.Sweep(time.Hour)
	if err != nil || removed != nil {
		t.Fatalf("Sweep = %q, %v; want nothing", removed, err)
	}
}

// TestSweepConcurrentWithWrites sweeps with a zero-width retention while
// writers add files to old and new sessions: every file whose Write returned
// must survive, since it was written during the sweep, and the untouched old
// sessions must go.
func TestSweepConcurrentWithWrites(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s := newStore(t, data, Options{})
	old := time.Now().Add(-30 * 24 * time.Hour)
	const sessions = 20
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = "s" + string(rune('a'+i))
		p, err := s.Write(ids[i], "seed", []byte("old"))
		if err != nil {
			t.Fatal(err)
		}
		age(t, old, p)
	}
	// Writers touch the even sessions and some brand-new ones.
	targets := []string{"new-1", "new-2"}
	for i := 0; i < sessions; i += 2 {
		targets = append(targets, ids[i])
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var written []string
	for _, id := range targets {
		for range 5 {
			wg.Go(func() {
				<-start
				p, err := s.Write(id, "out", []byte("new"))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				written = append(written, p)
				mu.Unlock()
			})
		}
	}
	sweeps := make(chan []string, 3)
	for range cap(sweeps) {
		wg.Go(func() {
			<-start
			removed, err := s.Sweep(24 * time.Hour)
			if err != nil {
				t.Error(err)
			}
			sweeps <- removed
		})
	}
	close(start)
	wg.Wait()
	close(sweeps)

	for _, p := range written {
		if !exists(t, p) {
			t.Errorf("%s was written during the sweep and removed", p)
		}
	}
	// Every odd session existed when each sweep listed scratch and nobody
	// wrote it, so exactly one sweep removed it.
	count := map[string]int{}
	for removed := range sweeps {
		for _, id := range removed {
			count[id]++
		}
	}
	for i := 1; i < sessions; i += 2 {
		if exists(t, filepath.Join(data, "scratch", ids[i])) || count[ids[i]] != 1 {
			t.Errorf("old session %s: removed by %d sweeps, want 1", ids[i], count[ids[i]])
		}
	}
	for _, id := range []string{"new-1", "new-2"} {
		if !exists(t, filepath.Join(data, "scratch", id)) {
			t.Errorf("new session %s was removed", id)
		}
	}
}

func TestRemoveSession(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s := newStore(t, data, Options{})
	a, err := s.Write("a", "out", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Write("b", "out", []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveSession("a"); err != nil {
		t.Fatal(err)
	}
	if exists(t, filepath.Join(data, "scratch", "a")) || exists(t, a) {
		t.Error("session a survived RemoveSession")
	}
	if !exists(t, b) {
		t.Error("session b was removed with a")
	}
	// Removing again, or a session never written, is not an error.
	for _, id := range []string{"a", "never"} {
		if err := s.RemoveSession(id); err != nil {
			t.Errorf("RemoveSession(%q) = %v", id, err)
		}
	}
	// A later write starts a fresh directory.
	if _, err := s.Write("a", "out", []byte("again")); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveSession("../b"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("RemoveSession(../b) = %v, want ErrInvalidName", err)
	}
	if !exists(t, b) {
		t.Error("traversal reached session b")
	}
}

// TestRemoveSessionConcurrentWithWrites removes a session while it and
// another session are written: no Write or RemoveSession fails, and the
// other session's files all survive intact.
func TestRemoveSessionConcurrentWithWrites(t *testing.T) {
	t.Parallel()
	s := newStore(t, t.TempDir(), Options{})
	start := make(chan struct{})
	var wg sync.WaitGroup
	paths := make([]string, 50)
	for i := range paths {
		wg.Go(func() {
			<-start
			var err error
			if paths[i], err = s.Write("keep", "out", []byte("k")); err != nil {
				t.Error(err)
			}
		})
	}
	for range 10 {
		wg.Go(func() {
			<-start
			if _, err := s.Write("drop", "out", []byte("d")); err != nil {
				t.Error(err)
			}
			if err := s.RemoveSession("drop"); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, p := range paths {
		if got, err := os.ReadFile(p); err != nil || string(got) != "k" {
			t.Errorf("%s = %q, %v", p, got, err)
		}
	}
}
