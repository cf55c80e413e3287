package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Page classes of a bbolt file, as pagesByClass finds them.
var pageClasses = []string{"meta", "freelist", "branch", "leaf", "overflow"}

// damageStore builds a store with every page class: 8 sessions of 60
// entries (every fifth one's Result over a page: overflow pages), trimmed
// to 40 (freed pages), each with a batch and an entry left started. It
// returns the directory and every entry's bytes by "session/id".
func damageStore(t testing.TB) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	j, err := Open(dir, Options{MaxEntries: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 8 * 60 {
		s := fmt.Sprintf("s%d", i%8)
		res := fmt.Sprintf(`{"stdout":"%d %s"}`, i, strings.Repeat("x", 100))
		if i%5 == 0 {
			res = fmt.Sprintf(`{"stdout":"%d %s"}`, i, strings.Repeat("y", 6000))
		}
		st, err := j.Start(s, "make", time.Now())
		if err == nil {
			err = j.Finish(st, time.Now(), json.RawMessage(res), "/tmp")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		s := fmt.Sprintf("s%d", i)
		if _, _, err := j.StartBatchEntries(s, []string{"a", "b"}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return dir, entriesOf(t, j)
}

// entriesOf reads every entry of every session.
func entriesOf(t testing.TB, j *Journal) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	infos, err := j.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range infos {
		list, _, err := j.List(s.ID, 0, MaxList)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range list {
			var e Entry
			json.Unmarshal(raw, &e)
			out[s.ID+"/"+e.ID] = raw
		}
	}
	return out
}

// pagesByClass parses the store's page headers (verify's walk) and
// returns the page IDs of each class.
func pagesByClass(t testing.TB, path string) (map[string][]uint64, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	out := map[string][]uint64{"meta": {0, 1}}
	w := &walker{f: f, onPage: func(id, over uint64, flags uint16) {
		switch flags {
		case freelistFlag:
			out["freelist"] = append(out["freelist"], id)
		case branchFlag:
			out["branch"] = append(out["branch"], id)
		case leafFlag:
			out["leaf"] = append(out["leaf"], id)
		}
		for p := id + 1; p <= id+over; p++ {
			out["overflow"] = append(out["overflow"], p)
		}
	}}
	if err := w.verify(fi.Size()); err != nil {
		t.Fatalf("the pristine store fails verify: %v", err)
	}
	for _, c := range pageClasses {
		if len(out[c]) == 0 {
			t.Fatalf("the store has no %s page", c)
		}
	}
	return out, w.ps
}

// damage is one way of writing random bytes into a page.
type damage struct {
	name string
	off  func(r *rand.Rand, ps int) (int, int) // offset and length inside the page
}

var damages = []damage{
	// The whole page.
	{"page", func(r *rand.Rand, ps int) (int, int) { return 0, ps }},
	// The header and the first elements (a meta page's fields).
	{"head", func(r *rand.Rand, ps int) (int, int) { return 0, 64 }},
	// 32 bytes somewhere inside.
	{"block", func(r *rand.Rand, ps int) (int, int) { return r.IntN(ps - 32), 32 }},
}

func writeRandom(t testing.TB, path string, at int64, n int, r *rand.Rand) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func copyStore(t testing.TB, from string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(from, "journal", FileName))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "journal"), 0o700)
	if err := os.WriteFile(filepath.Join(dir, "journal", FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// within runs fn and fails the test when it takes longer than d (a wedge).
func within[T any](t testing.TB, d time.Duration, what string, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		panic("unreachable")
	}
}

// casesPerClass is how many pages of each class a damage test hits.
const casesPerClass = 4

// damagedPages lists (class, page) pairs: up to casesPerClass pages of
// each class, spread over the class.
func damagedPages(classes map[string][]uint64) [][2]any {
	var out [][2]any
	for _, c := range pageClasses {
		ids := classes[c]
		for i := range min(casesPerClass, len(ids)) {
			out = append(out, [2]any{c, ids[i*len(ids)/min(casesPerClass, len(ids))]})
		}
	}
	return out
}

// TestDamageAtOpen writes random bytes into pages of every class of a
// closed store: Open refuses it with the CorruptError that names the file
// and says how to move it aside, or (bytes that landed where nothing is
// kept: a page's unused tail) opens it with every entry as it was. Never a
// panic, never a wait past a bound.
func TestDamageAtOpen(t *testing.T) {
	t.Parallel()
	pristine, want := damageStore(t)
	classes, ps := pagesByClass(t, filepath.Join(pristine, "journal", FileName))
	r := rand.New(rand.NewPCG(1, 2))
	counts := map[string][3]int{} // class: cases, refused, harmless
	for _, pc := range damagedPages(classes) {
		class, id := pc[0].(string), pc[1].(uint64)
		for _, d := range damages {
			name := fmt.Sprintf("%s/%d/%s", class, id, d.name)
			dir := copyStore(t, pristine)
			path := filepath.Join(dir, "journal", FileName)
			off, n := d.off(r, ps)
			writeRandom(t, path, int64(id)*int64(ps)+int64(off), n, r)
			j, err := within(t, 10*time.Second, name+": Open", func() *openResult {
				j, err := Open(dir, Options{MaxEntries: 40})
				return &openResult{j, err}
			}).get()
			c := counts[class]
			c[0]++
			var ce *CorruptError
			switch {
			case errors.As(err, &ce):
				if ce.Path != path || !strings.Contains(err.Error(), "mv "+path+" "+path+".corrupt") {
					t.Errorf("%s: %v", name, err)
				}
				c[1]++
			case err != nil:
				t.Errorf("%s: Open: %v, want a CorruptError", name, err)
			default:
				got := entriesOf(t, j)
				j.Close()
				if len(got) != len(want) {
					t.Errorf("%s: opened with %d entries, want %d", name, len(got), len(want))
				}
				for k, v := range want {
					if !bytes.Equal(got[k], v) {
						t.Errorf("%s: opened, and entry %s changed", name, k)
						break
					}
				}
				c[2]++
			}
			counts[class] = c
		}
	}
	for _, c := range pageClasses {
		t.Logf("FIGURE damage at open: %s pages: %d cases, %d refused, %d harmless (no kept byte changed), 0 panics, 0 wedges",
			c, counts[c][0], counts[c][1], counts[c][2])
	}
}

type openResult struct {
	j   *Journal
	err error
}

func (o *openResult) get() (*Journal, error) { return o.j, o.err }

// TestDamageWhileOpen writes random bytes into pages of every class of an
// open store (bbolt sees them through its mapping), then reads and writes:
// every call returns within a bound, none panics, a call either answers
// (an entry it returns is the one stored) or fails, and once a storage
// fault took the journal offline every call fails with ErrOffline. The
// next Open refuses the file or opens it. Only damage that garbles whole
// page IDs runs here ("page", "head"): bytes that rewire a branch to
// another live page can send bbolt into a cycle, which no recover catches;
// TestDamageAtOpen shows the next start refuses them.
func TestDamageWhileOpen(t *testing.T) {
	t.Parallel()
	pristine, want := damageStore(t)
	classes, ps := pagesByClass(t, filepath.Join(pristine, "journal", FileName))
	r := rand.New(rand.NewPCG(3, 4))
	counts := map[string][3]int{} // class: cases, offline, served throughout
	for _, pc := range damagedPages(classes) {
		class, id := pc[0].(string), pc[1].(uint64)
		for _, d := range damages[:2] {
			name := fmt.Sprintf("%s/%d/%s", class, id, d.name)
			dir := copyStore(t, pristine)
			path := filepath.Join(dir, "journal", FileName)
			j, err := Open(dir, Options{MaxEntries: 40})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			off, n := d.off(r, ps)
			writeRandom(t, path, int64(id)*int64(ps)+int64(off), n, r)
			within(t, 20*time.Second, name+": the calls", func() int {
				exercise(t, name, j, want)
				return 0
			})
			c := counts[class]
			c[0]++
			if off := j.Offline(); off != nil {
				if testing.Verbose() {
					t.Logf("%s: %v", name, off)
				}
				c[1]++
			} else {
				c[2]++
			}
			counts[class] = c
			within(t, 10*time.Second, name+": Close", func() error { return j.Close() })
			j2, err := within(t, 10*time.Second, name+": reopen", func() *openResult {
				j, err := Open(dir, Options{MaxEntries: 40})
				return &openResult{j, err}
			}).get()
			var ce *CorruptError
			switch {
			case err == nil:
				j2.Close()
			case !errors.As(err, &ce):
				t.Errorf("%s: reopen: %v, want a CorruptError or none", name, err)
			}
		}
	}
	for _, c := range pageClasses {
		t.Logf("FIGURE damage while open: %s pages: %d cases, %d took the journal offline, %d served throughout, 0 panics, 0 wedges",
			c, counts[c][0], counts[c][1], counts[c][2])
	}
}

// exercise reads every entry, lists, sweeps and writes through j, checking
// each answer.
func exercise(t *testing.T, name string, j *Journal, want map[string][]byte) {
	check := func(op string, err error) {
		if err == nil || errors.Is(err, ErrNotFound) {
			return
		}
		if off := j.Offline(); (off != nil) != errors.Is(err, ErrOffline) {
			t.Errorf("%s: %s: %v (offline: %v)", name, op, err, off)
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		s, id, _ := strings.Cut(k, "/")
		got, err := j.Get(s, id)
		check("get "+k, err)
		if err == nil && !bytes.Equal(got, want[k]) {
			t.Errorf("%s: get %s returned other bytes than were stored", name, k)
		}
	}
	for i := range 8 {
		_, _, err := j.List(fmt.Sprintf("s%d", i), 0, MaxList)
		check("list", err)
		st, err := j.Start(fmt.Sprintf("s%d", i), "after", time.Now())
		check("start", err)
		if err == nil {
			check("finish", j.Finish(st, time.Now(), json.RawMessage(`{"stdout":"after"}`), ""))
		}
	}
	_, err := j.Sessions()
	check("sessions", err)
	_, err = j.Sweep(time.Now().Add(30*24*time.Hour), nil)
	check("sweep", err)
	if off := j.Offline(); off != nil {
		if _, err := j.Start("s0", "x", time.Now()); !errors.Is(err, ErrOffline) {
			t.Errorf("%s: a start after the fault: %v", name, err)
		}
	}
}

// TestTruncatedWhileOpen cuts the file of an open store to a third: bbolt's
// next read of a page past the new end faults on its mapping (SIGBUS),
// which without debug.SetPanicOnFault kills the process. The journal goes
// offline instead, every call returns, and the next Open refuses the file.
func TestTruncatedWhileOpen(t *testing.T) {
	t.Parallel()
	pristine, want := damageStore(t)
	dir := copyStore(t, pristine)
	path := filepath.Join(dir, "journal", FileName)
	j, err := Open(dir, Options{MaxEntries: 40})
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if err := os.Truncate(path, fi.Size()/3); err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "the calls", func() int {
		exercise(t, "truncated", j, want)
		return 0
	})
	off := j.Offline()
	if !errors.Is(off, ErrOffline) || !strings.Contains(off.Error(), path) {
		t.Fatalf("after reads past the end: offline %v", off)
	}
	t.Log(off)
	within(t, 10*time.Second, "Close", func() error { return j.Close() })
	_, err = Open(dir, Options{})
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("reopen: %v", err)
	}
}
