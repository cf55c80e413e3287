package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string, o Options) *Journal {
	t.Helper()
	j, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func run(t *testing.T, j *Journal, session, command, result string) Started {
	t.Helper()
	st, err := j.Start(session, command, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(st, time.Now(), json.RawMessage(result), ""); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestEntries(t *testing.T) {
	t.Parallel()
	j := open(t, t.TempDir(), Options{})
	var ids []string
	for i := range 5 {
		st := run(t, j, "s1", fmt.Sprintf("echo %d", i), fmt.Sprintf(`{"stdout":"%d <&>\n"}`, i))
		if st.Seq != uint64(i+1) {
			t.Fatalf("seq %d, want %d", st.Seq, i+1)
		}
		ids = append(ids, st.ID)
	}
	raw, err := j.Get("s1", ids[2])
	if err != nil {
		t.Fatal(err)
	}
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	// The result is spliced verbatim: no HTML escaping, no re-encoding.
	if string(e.Result) != `{"stdout":"2 <&>\n"}` || e.Seq != 3 || e.Command != "echo 2" || e.EndedAt == nil || e.ID != ids[2] {
		t.Fatalf("entry %s", raw)
	}
	if !bytes.HasPrefix(raw, []byte(`{"id":"`+ids[2]+`","session":"s1","seq":3,"command":"echo 2","startedAt":`)) {
		t.Fatalf("entry field order: %s", raw)
	}
	list, next, err := j.List("s1", 1, 2)
	if err != nil || len(list) != 2 || next != 3 {
		t.Fatalf("list after 1: %d entries, next %d, %v", len(list), next, err)
	}
	if !bytes.Equal(list[1], raw) {
		t.Fatalf("list and get differ:\n%s\n%s", list[1], raw)
	}
	if list, next, _ := j.List("s1", 5, 10); len(list) != 0 || next != 5 {
		t.Fatalf("list past the end: %d, next %d", len(list), next)
	}
	info, err := j.Session("s1")
	if err != nil || info.Results != 5 {
		t.Fatalf("session: %+v %v", info, err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	j := open(t, t.TempDir(), Options{})
	st := run(t, j, "s", "true", `{}`)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		// An unknown session.
		{"get unknown session", errOf(j.Get("nope", st.ID)), ErrNotFound},
		// An ID of another shape.
		{"get bad id", errOf(j.Get("s", "r-x-1")), ErrNotFound},
		// A seq that does not exist.
		{"get unknown seq", errOf(j.Get("s", strings.TrimSuffix(st.ID, "1")+"9")), ErrNotFound},
		// A session against the spill-name rules.
		{"bad session", errOf(j.Start("../x", "true", time.Now())), ErrInvalidSession},
		{"empty session", errOf(j.Session("")), ErrInvalidSession},
		// Finishing twice.
		{"finish twice", j.Finish(st, time.Now(), json.RawMessage(`{}`), ""), ErrFinished},
		{"list unknown", errOf3(j.List("nope", 0, 1)), ErrNotFound},
		{"delete unknown", j.DeleteSession("nope"), ErrNotFound},
		{"batch unknown", errOf(j.Batch("s", "b-1")), ErrNotFound},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, _, err := j.List("s", 0, MaxList+1); err == nil {
		t.Error("limit above MaxList accepted")
	}
	if err := j.Finish(st, time.Now(), json.RawMessage(`{`), ""); err == nil {
		t.Error("invalid JSON accepted")
	}
}

func errOf[T any](_ T, err error) error { return err }

func errOf3[T, U any](_ T, _ U, err error) error { return err }

func TestTrim(t *testing.T) {
	t.Parallel()
	j := open(t, t.TempDir(), Options{MaxEntries: 3})
	var ids []string
	for range 5 {
		ids = append(ids, run(t, j, "s", "true", `{}`).ID)
	}
	list, next, err := j.List("s", 0, 10)
	if err != nil || len(list) != 3 || next != 5 {
		t.Fatalf("%d entries, next %d, %v", len(list), next, err)
	}
	if _, err := j.Get("s", ids[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("trimmed entry: %v", err)
	}
	if info, _ := j.Session("s"); info.Results != 3 {
		t.Fatalf("results %d", info.Results)
	}
}

func TestDeleteAndSweep(t *testing.T) {
	t.Parallel()
	j := open(t, t.TempDir(), Options{Retention: time.Hour})
	old := time.Now().Add(-2 * time.Hour)
	for _, s := range []string{"old", "busy", "new"} {
		at := old
		if s == "new" {
			at = time.Now()
		}
		st, err := j.Start(s, "true", at)
		if err != nil {
			t.Fatal(err)
		}
		j.Finish(st, at, json.RawMessage(`{}`), "/tmp")
	}
	swept, err := j.Sweep(time.Now(), func(id string) bool { return id == "busy" })
	if err != nil || len(swept) != 1 || swept[0] != "old" {
		t.Fatalf("swept %v, %v", swept, err)
	}
	ss, _ := j.Sessions()
	if len(ss) != 2 || ss[0].ID != "new" || ss[0].Cwd != "/tmp" {
		t.Fatalf("sessions %+v", ss)
	}
	st, _ := j.Start("new", "sleep", time.Now())
	if err := j.DeleteSession("new"); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(st, time.Now(), json.RawMessage(`{}`), ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("finish after delete: %v", err)
	}
	// A new session of the same name has a new token: old IDs do not name its entries.
	st2, _ := j.Start("new", "true", time.Now())
	if st2.Seq != 1 || st2.ID == st.ID {
		t.Fatalf("recreated: %+v after %+v", st2, st)
	}
}

func TestRecover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := run(t, j, "s", "echo done", `{"stdout":"done\n"}`)
	running, _ := j.Start("s", "sleep 100", time.Now())
	bt, _ := j.StartBatch("s", []string{done.ID, running.ID}, time.Now())
	before, _ := j.Get("s", done.ID)
	j.Close() // as if the process died: nothing finished them

	j = open(t, dir, Options{})
	if n := j.Unfinished(); n != 2 {
		t.Fatalf("unfinished %d", n)
	}
	// Started by this process: not recovered.
	mine, _ := j.Start("s", "sleep 1", time.Now())
	n, err := j.Recover(time.Now(), func(e Entry) (json.RawMessage, error) {
		if e.ID != running.ID || e.Result != nil {
			t.Errorf("completing %+v", e)
		}
		return json.RawMessage(`{"aborted":true,"interrupted":true}`), nil
	})
	if err != nil || n != 1 {
		t.Fatalf("recovered %d, %v", n, err)
	}
	e, _ := j.Entry("s", running.ID)
	if string(e.Result) != `{"aborted":true,"interrupted":true}` || e.EndedAt == nil {
		t.Fatalf("recovered entry %+v", e)
	}
	after, _ := j.Get("s", done.ID)
	if !bytes.Equal(before, after) {
		t.Fatal("a finished entry changed")
	}
	b, _ := j.Batch("s", bt.ID)
	if !b.Interrupted || b.EndedAt == nil || len(b.ResultIDs) != 2 {
		t.Fatalf("batch %+v", b)
	}
	if err := j.Finish(mine, time.Now(), json.RawMessage(`{}`), ""); err != nil {
		t.Fatalf("this process's entry: %v", err)
	}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := run(t, j, "s", "a", `{}`)
	bt, err := j.StartBatch("s", []string{a.ID}, time.Now())
	if err != nil || !strings.HasPrefix(bt.ID, "b-") {
		t.Fatalf("%+v %v", bt, err)
	}
	view := json.RawMessage(`{"view":"<b>\u00e9","n":1}`)
	if err := j.EndBatch("s", bt.ID, time.Now(), view); err != nil {
		t.Fatal(err)
	}
	if err := j.EndBatch("s", bt.ID, time.Now(), view); !errors.Is(err, ErrFinished) {
		t.Fatalf("end twice: %v", err)
	}
	j.Close()
	j = open(t, dir, Options{})
	got, err := j.Batch("s", bt.ID)
	if err != nil || !bytes.Equal(got.View, view) || got.ResultIDs[0] != a.ID {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	j := open(t, t.TempDir(), Options{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				st, err := j.Start(fmt.Sprintf("s%d", w%2), "x", time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				if err := j.Finish(st, time.Now(), json.RawMessage(fmt.Sprint(i)), ""); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, s := range []string{"s0", "s1"} {
		list, next, err := j.List(s, 0, MaxList)
		if err != nil || len(list) != 100 || next != 100 {
			t.Fatalf("%s: %d entries, next %d, %v", s, len(list), next, err)
		}
	}
}

func TestLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open(t, dir, Options{})
	begin := time.Now()
	_, err := Open(dir, Options{LockTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), filepath.Join(dir, "journal", FileName)) {
		t.Fatalf("second open: %v", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("second open took %v", d)
	}
}

func TestCorrupt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(data []byte) []byte
	}{
		// Cut in half.
		{"half", func(d []byte) []byte { return d[:len(d)/2] }},
		// Random bytes of the same size.
		{"random", func(d []byte) []byte {
			out := make([]byte, len(d))
			for i := range out {
				out[i] = byte(i*7919 + i>>3)
			}
			return out
		}},
		// Fewer bytes than one page.
		{"tiny", func(d []byte) []byte { return d[:100] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			j, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				run(t, j, fmt.Sprintf("s%d", i%7), "x", `{"stdout":"`+strings.Repeat("y", 3000)+`"}`)
			}
			j.Close()
			path := filepath.Join(dir, "journal", FileName)
			data, _ := os.ReadFile(path)
			if err := os.WriteFile(path, tc.damage(data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir, Options{})
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), "mv "+path) {
				t.Fatalf("open of a damaged file: %v", err)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
}
