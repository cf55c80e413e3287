package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/journal"
)

func TestRunBatch(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	dir := t.TempDir()
	// Each command waits (up to 30 s) until two of them run, then prints how
	// many it saw running: with concurrency 2 that is 2, never more. (It
	// prints the count it saw, not a second look: by then the other may have
	// ended.)
	wait := `touch "$D/$I"; for k in $(seq 600); do n=$(ls "$D" | wc -l); [ $n -ge 2 ] && break; sleep 0.05; done; echo $n; sleep 0.1; rm "$D/$I"`
	var reqs []Request
	for i := range 4 {
		reqs = append(reqs, marked(t, Request{Command: wait, Env: map[string]string{"D": dir, "I": fmt.Sprint(i)}}))
	}
	reqs = append(reqs, Request{Command: "echo out; echo err >&2; exit 3"})
	res, err := s.RunBatch(context.Background(), BatchRequest{Requests: reqs, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.ID, "b-") || res.Session != "default" || len(res.Results) != 5 {
		t.Fatalf("batch %+v", res)
	}
	for i, e := range res.Results[:4] {
		if e.Stdout != "2\n" || e.ExitCode == nil || *e.ExitCode != 0 {
			t.Errorf("results[%d]: stdout %q exit %v stderr %q, want 2 commands running", i, e.Stdout, e.ExitCode, e.Stderr)
		}
	}
	last := res.Results[4]
	if last.Stdout != "out\n" || last.Stderr != "err\n" || *last.ExitCode != 3 {
		t.Errorf("results[4]: %+v", last)
	}
	// The view is the batch text of the results, whole.
	items := make([]budget.BatchItem, len(reqs))
	for i, e := range res.Results {
		items[i] = budget.BatchItem{Command: reqs[i].Command, Text: e.Text()}
	}
	want := budget.BatchView(items, budget.BatchOptions{})
	if res.View != want.View || res.Truncated || res.KeptResults != 5 || res.ViewBytes != len(res.View) || res.TotalBytes != len(res.View) {
		t.Errorf("view %q (%+v), want %q", res.View, res, want.View)
	}
	if !strings.Contains(res.View, "[5/5] $ echo out; echo err >&2; exit 3\nout\n[stderr]\nerr\n[exit code 3 after ") {
		t.Errorf("view lacks the last result's text: %q", res.View)
	}
}

func TestRunBatchCompacts(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	var reqs []Request
	for i := range 3 {
		reqs = append(reqs, Request{Command: fmt.Sprintf("seq %d 1000 | head -c 3000", i)})
	}
	res, err := s.RunBatch(context.Background(), BatchRequest{Requests: reqs, Budget: MinBatchBudget})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.KeptResults != 2 || res.ViewBytes > MinBatchBudget || res.TotalBytes <= MinBatchBudget {
		t.Fatalf("batch %+v", res)
	}
	wantMark := fmt.Sprintf("[batch compacted: kept the last 2 of 3 results (%d of %d bytes); limit 4KB. ", res.ViewBytes, res.TotalBytes)
	mark, tail, _ := strings.Cut(res.View, "\n")
	if !strings.HasPrefix(mark, wantMark) || len(tail) != res.ViewBytes || !strings.HasSuffix(tail, res.Results[2].Text()+"\n") {
		t.Errorf("view %q, want the marker %q and the whole last result", res.View, wantMark)
	}
	// Compaction shapes the view only: every Result is whole.
	for i, e := range res.Results {
		if len(e.Stdout) != 3000 || e.Truncated {
			t.Errorf("results[%d] holds %d bytes of stdout (truncated %v), want 3000", i, len(e.Stdout), e.Truncated)
		}
	}
}

func TestRunBatchInvalid(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	dir := t.TempDir()
	ok := Request{Command: "touch " + dir + "/ran"}
	many := make([]Request, 33)
	for i := range many {
		many[i] = ok
	}
	tests := []struct {
		name string
		b    BatchRequest
		want string
	}{
		{"no requests", BatchRequest{}, "a batch holds 1 to 32 requests, got 0"},
		{"33 requests", BatchRequest{Requests: many}, "a batch holds 1 to 32 requests, got 33"},
		{"negative concurrency", BatchRequest{Requests: []Request{ok}, Concurrency: -1}, "concurrency must be between 1 and 32, got -1"},
		{"concurrency 33", BatchRequest{Requests: []Request{ok}, Concurrency: 33}, "concurrency must be between 1 and 32, got 33"},
		{"budget under 4 KiB", BatchRequest{Requests: []Request{ok}, Budget: 4095}, "budget must be between 4096 (4 KiB) and 16777216 (16 MiB) bytes, got 4095"},
		{"budget over 16 MiB", BatchRequest{Requests: []Request{ok}, Budget: 16<<20 + 1}, "budget must be between 4096 (4 KiB) and 16777216 (16 MiB) bytes, got 16777217"},
		{"bad session", BatchRequest{Requests: []Request{ok}, Session: "a/b"}, `session "a/b" `},
		{"one bad request", BatchRequest{Requests: []Request{ok, {Command: "true", Timeout: 301 * time.Second}}},
			"requests[1]: timeout must be between 1 and 300 seconds, got 301"},
		{"empty command", BatchRequest{Requests: []Request{ok, ok, {Command: " "}}}, "requests[2]: command is empty"},
		{"other session", BatchRequest{Session: "s1", Requests: []Request{ok, {Command: "true", Session: "s2"}}},
			`requests[1]: session "s2" differs from the batch's session "s1"; a batch runs in one session`},
		{"yield", BatchRequest{Requests: []Request{{Command: "true", Yield: time.Second}}}, "requests[0]: yield is not supported in a batch"},
		{"too long", BatchRequest{Requests: []Request{ok, {Command: strings.Repeat("x", 200<<10)}}}, "requests[1]: the command (204800 bytes) exceeds"},
	}
	for _, tt := range tests {
		_, err := s.RunBatch(context.Background(), tt.b)
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want ErrInvalidRequest with %q", tt.name, err, tt.want)
		}
	}
	if n := s.Stats().Started; n != 0 {
		t.Errorf("%d commands started, want none", n)
	}
}

// TestRunBatchReserve: Reserve runs only for a valid batch, before anything
// starts; its error refuses the batch; the concurrency it grants bounds the
// commands running at once; its release runs when RunBatch returns.
func TestRunBatchReserve(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	dir := t.TempDir()
	busy := errors.New("no slots")
	calls := 0
	refuse := func(ctx context.Context, n int) (context.Context, int, func(), error) {
		calls++
		return ctx, 0, nil, busy
	}
	_, err := s.RunBatch(context.Background(), BatchRequest{Requests: []Request{{Command: "touch " + dir + "/ran"}}, Reserve: refuse})
	if !errors.Is(err, busy) || calls != 1 || s.Stats().Started != 0 {
		t.Fatalf("refused: %v, %d calls, %d started", err, calls, s.Stats().Started)
	}
	if _, err := s.RunBatch(context.Background(), BatchRequest{Reserve: refuse}); !errors.Is(err, ErrInvalidRequest) || calls != 1 {
		t.Errorf("an invalid batch: %v, Reserve called %d times, want once in all", err, calls)
	}

	// Granted 1 of 4: the commands never overlap (each holds a directory
	// as a lock while it runs).
	var asked, released int
	one := func(ctx context.Context, n int) (context.Context, int, func(), error) {
		asked = n
		return ctx, 1, func() { released++ }, nil
	}
	lock := `mkdir "$D/lock" || echo overlap; sleep 0.2; rmdir "$D/lock"`
	var reqs []Request
	for range 4 {
		reqs = append(reqs, Request{Command: lock, Env: map[string]string{"D": dir}})
	}
	res, err := s.RunBatch(context.Background(), BatchRequest{Requests: reqs, Concurrency: 4, Reserve: one})
	if err != nil || asked != 4 || released != 1 {
		t.Fatalf("granted one: %v, asked %d, released %d", err, asked, released)
	}
	for i, r := range res.Results {
		if r.Stdout != "" || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Errorf("result %d: %q %q", i, r.Stdout, r.Stderr)
		}
	}
}

func TestRunBatchCancel(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	first := marked(t, Request{Command: "echo up; sleep 30", OnEvent: func(ev Event) {
		if ev.Event == EventOutput {
			close(started)
		}
	}})
	go func() {
		<-started
		cancel()
	}()
	res, err := s.RunBatch(ctx, BatchRequest{Requests: []Request{first, {Command: "echo never"}}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; !r.Aborted || r.Stdout != "up\n" {
		t.Errorf("results[0] %+v, want aborted after up", r)
	}
	r := res.Results[1]
	if r.ExitCode != nil || r.Signal != "" || r.Stdout != "" ||
		r.Stderr != "[corral: the command did not start: the batch was cancelled before its turn.]" || r.Status() != "[did not start]" {
		t.Errorf("results[1] %+v, want not started", r)
	}
	if n := s.Stats().Started; n != 1 {
		t.Errorf("%d commands started, want 1", n)
	}
}

func TestRunBatchJournaled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := openJournal(t, dir)
	s := newSup(t, Config{DataDir: dir, Journal: j})
	before := run(t, s, Request{Command: "echo before", Session: "jb"})
	beforeBytes, err := j.Get("jb", before.ID)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []Request
	for i := range 4 {
		reqs = append(reqs, Request{Command: fmt.Sprintf("seq %d 2000 | head -c 3000", i)})
	}
	reqs = append(reqs, Request{Command: "echo '<&>'"})
	res, err := s.RunBatch(context.Background(), BatchRequest{Session: "jb", Requests: reqs, Budget: MinBatchBudget})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || !strings.Contains(res.View, "; limit 4KB. Every result is kept whole in the session journal — read one with GET /v1/sessions/jb/results/<rid>.]\n") {
		t.Errorf("view %q", res.View)
	}
	// Every Result is its journal entry's, whole.
	for i, r := range res.Results {
		e, jr := entryResult(t, j, "jb", r.ID)
		if e.Seq != uint64(i+2) || e.Command != reqs[i].Command || !cmp.Equal(jr, r) {
			t.Errorf("results[%d] (seq %d): journal %+v, batch %+v", i, e.Seq, jr, r)
		}
		if i < 4 && len(r.Stdout) != 3000 {
			t.Errorf("results[%d] holds %d bytes of stdout", i, len(r.Stdout))
		}
	}
	// The batch's JSON is the journal's, byte for byte, and decodes to it.
	got, err := s.Sessions().Batch("jb", res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, res.JSON()) {
		t.Errorf("Sessions.Batch\n%s\nJSON\n%s", got, res.JSON())
	}
	var back BatchResult
	want := res
	want.raw = nil
	if err := json.Unmarshal(got, &back); err != nil || !cmp.Equal(back, want, cmp.AllowUnexported(BatchResult{})) {
		t.Errorf("Sessions.Batch decodes to %+v (%v)", back, err)
	}
	if !bytes.Contains(got, []byte(`<&>`)) {
		t.Errorf("HTML-escaped JSON: %s", got)
	}
	// The entry from before the batch is unchanged.
	if after, _ := j.Get("jb", before.ID); !bytes.Equal(after, beforeBytes) {
		t.Errorf("entry %s changed:\n%s\n%s", before.ID, beforeBytes, after)
	}
	if _, err := s.Sessions().Batch("jb", "b-nope-1"); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("unknown batch: %v", err)
	}
}

// BenchmarkRunBatch times a batch of 32 `true` at concurrency 8 (and of 8
// at 8), with and without a journal, alternating in one loop; ratio = mean
// with / mean without. The journal writes each entry as started one after
// the other (their seqs follow request order) before the first command
// runs.
func BenchmarkRunBatch(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("true-x%d", n), func(b *testing.B) {
			dir := b.TempDir()
			j, err := journal.Open(dir, journal.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			plain := newSup(b, Config{})
			journaled := newSup(b, Config{Journal: j})
			reqs := make([]Request, n)
			for i := range reqs {
				reqs[i] = Request{Command: "true"}
			}
			round := func(s *Supervisor) time.Duration {
				start := time.Now()
				if _, err := s.RunBatch(context.Background(), BatchRequest{Session: "bench", Requests: reqs, Concurrency: 8}); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			var tPlain, tJournal time.Duration
			rounds := 0
			for b.Loop() {
				tPlain += round(plain)
				tJournal += round(journaled)
				rounds++
			}
			b.ReportMetric(float64(tJournal)/float64(tPlain), "ratio")
			b.ReportMetric(float64(tPlain.Microseconds())/float64(rounds), "plain-µs/batch")
			b.ReportMetric(float64(tJournal.Microseconds())/float64(rounds), "journal-µs/batch")
		})
	}
}
