package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/journal"
)

func openJournal(t testing.TB, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// entryResult decodes the journaled Result of id.
func entryResult(t *testing.T, j *journal.Journal, session, id string) (journal.Entry, Result) {
	t.Helper()
	e, err := j.Entry(session, id)
	if err != nil {
		t.Fatalf("entry %s: %v", id, err)
	}
	var res Result
	if err := json.Unmarshal(e.Result, &res); err != nil {
		t.Fatalf("entry %s result: %v: %s", id, err, e.Result)
	}
	return e, res
}

func TestJournalRecordsResults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := openJournal(t, dir)
	s := newSup(t, Config{DataDir: dir, Journal: j})
	res := run(t, s, Request{Command: "echo '<hi & bye>'", Session: "js"})
	if !strings.HasPrefix(res.ID, "r-") {
		t.Fatalf("Result.ID %q", res.ID)
	}
	e, _ := entryResult(t, j, "js", res.ID)
	want, _ := marshalResult(res)
	if !bytes.Equal(e.Result, want) || e.Command != "echo '<hi & bye>'" || e.Seq != 1 || e.EndedAt == nil {
		t.Fatalf("entry %+v\nresult %s\nwant   %s", e, e.Result, want)
	}
	// A request naming no session goes to "default".
	res2 := run(t, s, Request{Command: "exit 3"})
	if _, r := entryResult(t, j, StatelessSession, res2.ID); r.ExitCode == nil || *r.ExitCode != 3 {
		t.Fatalf("default entry %+v", r)
	}
	// A job's end Result is its entry's.
	started, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{Command: "echo job", Session: "js"})})
	if err != nil {
		t.Fatal(err)
	}
	jr, err := s.Jobs().Wait(context.Background(), started.ID, 10*time.Second)
	if err != nil || jr.ID == "" {
		t.Fatalf("job result %+v %v", jr, err)
	}
	if _, r := entryResult(t, j, "js", jr.ID); r.Stdout != "job\n" {
		t.Fatalf("job entry %+v", r)
	}
	// A command that yields returns the ID of the entry its job's final
	// Result completes.
	y := run(t, s, Request{Command: "echo early; sleep 100; echo late", Session: "js", Yield: 200 * time.Millisecond})
	if !y.Running || y.ID == "" {
		t.Fatalf("yield: %+v", y)
	}
	if e, _ := j.Entry("js", y.ID); string(e.Result) != "null" || e.EndedAt != nil {
		t.Fatalf("entry of a running command: %+v", e)
	}
	final, err := s.Jobs().Kill(y.JobID)
	if err != nil || final.ID != y.ID {
		t.Fatalf("final %+v %v", final, err)
	}
	if _, r := entryResult(t, j, "js", y.ID); !r.Aborted || !strings.Contains(r.Stdout, "early") {
		t.Fatalf("yielded entry %+v", r)
	}
	if info, _ := j.Session("js"); info.Results != 3 {
		t.Fatalf("session js has %d results", info.Results)
	}
}

// TestJournalInterrupted: an entry started by a server that died is
// completed as aborted and interrupted at the next New; finished entries
// stay byte for byte.
func TestJournalInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := New(Config{DataDir: dir, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	done := run(t, s1, Request{Command: "echo done", Session: "ji"})
	before, _ := j.Get("ji", done.ID)
	st, err := j.Start("ji", "sleep 1000", time.Now()) // as a running command's start
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()
	j.Close()

	j2 := openJournal(t, dir)
	newSup(t, Config{DataDir: dir, Journal: j2})
	_, r := entryResult(t, j2, "ji", st.ID)
	if !r.Aborted || !r.Interrupted || r.ID != st.ID || !strings.Contains(r.Stderr, "never recorded") || r.ExitCode != nil {
		t.Fatalf("interrupted entry %+v", r)
	}
	after, _ := j2.Get("ji", done.ID)
	if !bytes.Equal(before, after) {
		t.Fatalf("finished entry changed:\n%s\n%s", before, after)
	}
}

// TestJournalSessionResumes: after a restart a session starts in its
// journaled working directory with the server's environment, and the first
// Result says so.
func TestJournalSessionResumes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work := t.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := New(Config{DataDir: dir, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s1, Request{Command: "cd " + work + " && export FOO=bar", Session: "jr"})
	s1.Close()
	j.Close()

	j2 := openJournal(t, dir)
	s2 := newSup(t, Config{DataDir: dir, Journal: j2})
	res := run(t, s2, Request{Command: `pwd; echo "FOO=$FOO"`, Session: "jr"})
	real, _ := filepath.EvalSymlinks(work)
	if res.Stdout != real+"\nFOO=\n" {
		t.Fatalf("stdout %q, want the journaled cwd %s and no FOO", res.Stdout, real)
	}
	if !strings.Contains(res.Stderr, "reset to the server's environment") {
		t.Fatalf("no note: %q", res.Stderr)
	}
	if res2 := run(t, s2, Request{Command: "true", Session: "jr"}); res2.Stderr != "" {
		t.Fatalf("second command has a note: %q", res2.Stderr)
	}
}

// TestJournalDeleteSession: Sessions.Delete kills the session's jobs and
// removes its entries, spills and state.
func TestJournalDeleteSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := openJournal(t, dir)
	s := newSup(t, Config{DataDir: dir, Journal: j, Budget: budgetLimits(1000, 10)})
	res := run(t, s, Request{Command: "seq 1 5000", Session: "jd"})
	if res.StdoutInfo.SpillPath == "" {
		t.Fatal("no spill")
	}
	started, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{Command: "sleep 1000", Session: "jd"})})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sessions().Delete("jd"); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Jobs().Get(started.ID); info.State != JobExited {
		t.Fatalf("job %+v", info)
	}
	if _, err := j.Session("jd"); err == nil {
		t.Fatal("journal still has the session")
	}
	if _, err := os.Stat(res.StdoutInfo.SpillPath); !os.IsNotExist(err) {
		t.Fatalf("spill: %v", err)
	}
	if _, ok := s.Sessions().Get("jd"); ok {
		t.Fatal("state kept")
	}
}

// TestJournalSweep: a session idle past the retention goes with its
// spills and state; a busy one and a fresh one stay.
func TestJournalSweep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := openJournal(t, dir)
	s := newSup(t, Config{DataDir: dir, Journal: j, Budget: budgetLimits(1000, 10)})
	old := run(t, s, Request{Command: "seq 1 5000; cd /", Session: "old"})
	run(t, s, Request{Command: "true", Session: "fresh"})
	if old.StdoutInfo.SpillPath == "" {
		t.Fatal("no spill")
	}
	job, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{Command: "sleep 1000", Session: "busy"})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Jobs().Kill(job.ID)
	// Make "old" and "busy" idle for eight days, as their last use says.
	at := time.Now().Add(-8 * 24 * time.Hour)
	for _, id := range []string{"old", "busy"} {
		st, _ := j.Start(id, "true", at)
		j.Finish(st, at, json.RawMessage(`{}`), "")
	}
	if swept := s.Sessions().Sweep(); len(swept) != 1 || swept[0] != "old" {
		t.Fatalf("swept %v", swept)
	}
	if _, err := os.Stat(old.StdoutInfo.SpillPath); !os.IsNotExist(err) {
		t.Fatalf("spill of the swept session: %v", err)
	}
	if _, ok := s.Sessions().Get("old"); ok {
		t.Fatal("state of the swept session kept")
	}
	for _, id := range []string{"fresh", "busy"} {
		if _, err := j.Session(id); err != nil {
			t.Fatal(err)
		}
	}
}
