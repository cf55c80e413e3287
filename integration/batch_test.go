//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// call sends an authenticated request and returns the status and body.
func (s *server) call(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	resp, err := s.client.Do(s.request(ctx, method, path, body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// mustGet is a GET that must answer 200.
func (s *server) mustGet(t *testing.T, path string) []byte {
	t.Helper()
	code, b := s.call(t, http.MethodGet, path, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	return b
}

// kill SIGKILLs the server and reaps it.
func (s *server) kill(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.cmd.Wait()
	s.client.CloseIdleConnections()
}

// batchWire is a batch's JSON with its results kept as bytes.
type batchWire struct {
	ID          string            `json:"id"`
	Session     string            `json:"session"`
	Results     []json.RawMessage `json:"results"`
	View        string            `json:"view"`
	Truncated   bool              `json:"truncated"`
	KeptResults int               `json:"keptResults"`
	ViewBytes   int               `json:"viewBytes"`
	TotalBytes  int               `json:"totalBytes"`
	Interrupted bool              `json:"interrupted"`
}

// entryWire is a journal entry with its result kept as bytes.
type entryWire struct {
	ID      string          `json:"id"`
	Seq     uint64          `json:"seq"`
	Command string          `json:"command"`
	Result  json.RawMessage `json:"result"`
}

func decodeJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T: %v in %.300s", v, err, b)
	}
	return v
}

// TestBatchSurvivesRestart pins the tool-result-limits spec's last
// acceptance criterion: "an oversized parallel result batch compacts to a
// bounded marked tail, survives restart, and leaves the original
// transcript results unchanged". Eight commands of about 200 KB each run
// at once through POST /v1/batch; the view is a tail within the 256 KiB
// budget under the exact marker; `corral serve` is SIGKILLed and started
// again on the same data directory; the batch and every result (and one
// from before the batch) read back byte for byte as they were.
func TestBatchSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, "--data-dir", dir)
	m := marker(t)
	env := map[string]string{proctest.MarkerEnv: m}
	const session = "criterion"

	before := srv.exec(t, api.ExecRequest{Command: "echo before", Session: session, Env: env})
	beforeEntry := srv.mustGet(t, "/v1/sessions/"+session+"/results/"+before.ID)

	var reqs []api.ExecRequest
	for i := range 8 {
		reqs = append(reqs, api.ExecRequest{
			Command: fmt.Sprintf("seq -f 'command %d line %%g' 1 12000; echo 'err of %d' >&2", i, i), Env: env})
	}
	conc := 8
	code, posted := srv.call(t, http.MethodPost, "/v1/batch", api.BatchBody{Session: session, Requests: reqs, Concurrency: &conc})
	if code != http.StatusOK {
		t.Fatalf("POST /v1/batch: %d %.500s", code, posted)
	}
	res := decodeJSON[supervisor.BatchResult](t, posted)
	wire := decodeJSON[batchWire](t, posted)

	// Compacted to a bounded marked tail.
	const limit = supervisor.DefaultBatchBudget
	if !res.Truncated || res.TotalBytes <= limit || res.ViewBytes > limit || res.KeptResults < 2 || res.KeptResults >= 8 {
		t.Fatalf("batch not compacted as expected: truncated %v kept %d viewBytes %d totalBytes %d",
			res.Truncated, res.KeptResults, res.ViewBytes, res.TotalBytes)
	}
	mark, tail, _ := strings.Cut(res.View, "\n")
	wantMark := fmt.Sprintf("[batch compacted: kept the last %d of 8 results (%d of %d bytes); limit 256KB. "+
		"Every result is kept whole in the session journal — read one with GET /v1/sessions/%s/results/<rid>.]",
		res.KeptResults, res.ViewBytes, res.TotalBytes, session)
	if mark != wantMark {
		t.Errorf("marker\n%q\nwant\n%q", mark, wantMark)
	}
	items := make([]budget.BatchItem, len(reqs))
	for i, r := range res.Results {
		items[i] = budget.BatchItem{Command: reqs[i].Command, Text: r.Text()}
	}
	whole := budget.BatchView(items, budget.BatchOptions{MaxBytes: 1 << 30}).View
	// The view is a tail of the whole text on a line boundary, except that
	// a result cut inside its text keeps its [k/8] $ header line in front.
	isTail := func(x string) bool {
		return strings.HasSuffix(whole, x) && len(whole) > len(x) && whole[len(whole)-len(x)-1] == '\n'
	}
	ok := isTail(tail)
	if hdr, rest, _ := strings.Cut(tail, "\n"); !ok {
		ok = strings.HasPrefix(hdr, "[") && strings.Contains(hdr, "/8] $ ") && strings.Contains(whole, "\n"+hdr+"\n") && isTail(rest)
	}
	if len(tail) != res.ViewBytes || !ok {
		t.Errorf("the view's %d bytes after the marker are not a tail of the whole text on a line boundary (after the cut result's header)", len(tail))
	}

	// Every result is whole in the journal: its entry holds the very bytes
	// of the batch's result.
	entries := make([][]byte, len(res.Results))
	for i, r := range res.Results {
		if !r.Truncated || r.StdoutInfo.TotalLines != 12000 || r.Stderr != fmt.Sprintf("err of %d\n", i) {
			t.Errorf("results[%d]: %d stdout lines, stderr %q", i, r.StdoutInfo.TotalLines, r.Stderr)
		}
		entries[i] = srv.mustGet(t, "/v1/sessions/"+session+"/results/"+r.ID)
		if e := decodeJSON[entryWire](t, entries[i]); !bytes.Equal(e.Result, wire.Results[i]) || e.Command != reqs[i].Command {
			t.Errorf("entry %s holds\n%.300s\nthe batch has\n%.300s", r.ID, e.Result, wire.Results[i])
		}
	}
	batchPath := "/v1/sessions/" + session + "/batches/" + res.ID
	if got := srv.mustGet(t, batchPath); !bytes.Equal(got, posted) {
		t.Errorf("GET %s differs from the POST's answer", batchPath)
	}
	if got := srv.mustGet(t, "/v1/sessions/"+session+"/results/"+before.ID); !bytes.Equal(got, beforeEntry) {
		t.Errorf("the entry from before the batch changed:\n%s\n%s", beforeEntry, got)
	}

	// SIGKILL, restart on the same data directory, read everything back.
	srv.kill(t)
	srv = startServer(t, "--data-dir", dir)
	if got := srv.mustGet(t, batchPath); !bytes.Equal(got, posted) {
		t.Errorf("after the restart GET %s differs from the POST's answer:\n%.500s", batchPath, got)
	}
	for i, r := range res.Results {
		if got := srv.mustGet(t, "/v1/sessions/"+session+"/results/"+r.ID); !bytes.Equal(got, entries[i]) {
			t.Errorf("after the restart entry %s differs", r.ID)
		}
	}
	if got := srv.mustGet(t, "/v1/sessions/"+session+"/results/"+before.ID); !bytes.Equal(got, beforeEntry) {
		t.Errorf("after the restart the entry from before the batch changed")
	}
	checkGone(t, m)
}

// TestBatchServeKilled SIGKILLs `corral serve` in the middle of a batch of
// eight at concurrency 4: three quick commands have ended, four escaping
// trees run, one waits for its turn. The watchdog must leave no process of
// the old trees alive; after a restart the finished entries are intact,
// the others interrupted, and the batch record lists all eight and says it
// was interrupted.
func TestBatchServeKilled(t *testing.T) {
	warmUp(t)
	reapEarlier(t)
	check := processOracles(t)
	defer check()
	// In a subtest, so that both servers are stopped before the oracles.
	t.Run("batch", testBatchServeKilled)
}

// reapEarlier reaps the zombie children this test process has before a
// test started anything: orphans an earlier test's trees left to this
// subreaper (a shell killed between its fork and its exec is missed by a
// snapshot of descendants taken before the fork), which the zombie oracle
// would otherwise blame on this test. This test is not parallel: no other
// test runs meanwhile, so no exec.Cmd of another test is waiting for them.
func reapEarlier(t *testing.T) {
	for _, z := range proctest.Zombies(os.Getpid()) {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(z.PID, &ws, unix.WNOHANG, nil) // An error means it is gone already.
		t.Logf("reaped a zombie left by an earlier test: %v", z)
	}
}

func testBatchServeKilled(t *testing.T) {
	dir, flags := t.TempDir(), t.TempDir()
	srv := startServer(t, "--data-dir", dir)
	m := marker(t)
	const session = "killed"
	var reqs []api.ExecRequest
	for i := range 8 {
		cmd := fmt.Sprintf("echo fin-%d", i)
		if i >= 3 {
			// The flag appears once the escaper set its tree up; the shell
			// forks nothing after it (wait is a builtin).
			cmd = proctest.Command("escaper", "60") + fmt.Sprintf("; sleep 1000 & touch %s/%d; wait", flags, i)
		}
		reqs = append(reqs, api.ExecRequest{Command: cmd, Env: map[string]string{proctest.MarkerEnv: m}})
	}
	conc := 4
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), callLimit)
		defer cancel()
		// The server dies under this call: its error is the expected one.
		if resp, err := srv.client.Do(srv.request(ctx, http.MethodPost, "/v1/batch",
			api.BatchBody{Session: session, Requests: reqs, Concurrency: &conc})); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, 30*time.Second, "requests 3 to 6 running", func() bool {
		for i := 3; i <= 6; i++ {
			if _, err := os.Stat(filepath.Join(flags, fmt.Sprint(i))); err != nil {
				return false
			}
		}
		return true
	})
	// Requests 0 to 2 ended (each freed its slot for one of 4 to 6): their
	// entries, as they are now.
	list := decodeJSON[struct {
		Entries []json.RawMessage `json:"entries"`
	}](t, srv.mustGet(t, "/v1/sessions/"+session+"/results?after=0&limit=100"))
	if len(list.Entries) != 8 {
		t.Fatalf("%d entries before the kill, want 8 (written as started before the first command)", len(list.Entries))
	}
	adopted := descendants(srv.pid())
	srv.kill(t)
	<-done
	// Gone, not how fast: the watchdog's second is TestServeKilled's to
	// pin, and a loaded machine can take several (as TestServeRestartJournal
	// found).
	checkGoneWithin(t, m, 15*time.Second)
	reapAdopted(t, adopted)

	srv = startServer(t, "--data-dir", dir)
	// The batch's ID shares its token with its entries' (journal doc).
	first := decodeJSON[entryWire](t, list.Entries[0])
	token := strings.TrimSuffix(strings.TrimPrefix(first.ID, "r-"), "-1")
	b := srv.mustGet(t, "/v1/sessions/"+session+"/batches/b-"+token+"-1")
	got := decodeJSON[batchWire](t, b)
	if !got.Interrupted || got.View != "" || len(got.Results) != 8 {
		t.Fatalf("batch after the restart: %.1000s", b)
	}
	for i, raw := range got.Results {
		r := decodeResult(t, raw)
		entry := srv.mustGet(t, "/v1/sessions/"+session+"/results/"+r.ID)
		if e := decodeJSON[entryWire](t, entry); !bytes.Equal(e.Result, raw) || e.Seq != uint64(i+1) {
			t.Errorf("results[%d]: the entry holds\n%s\nthe batch\n%s", i, e.Result, raw)
		}
		switch {
		case i < 3:
			if r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != fmt.Sprintf("fin-%d\n", i) || r.Interrupted {
				t.Errorf("results[%d] should have ended: %+v", i, r)
			}
			if !bytes.Equal(entry, list.Entries[i]) {
				t.Errorf("entry %d changed across the restart:\n%s\n%s", i, list.Entries[i], entry)
			}
		default:
			if !r.Interrupted || !r.Aborted || r.ExitCode != nil || !strings.Contains(r.Stderr, "in a batch, waited for its turn") {
				t.Errorf("results[%d] should be interrupted: %+v", i, r)
			}
		}
	}
	if again := srv.mustGet(t, "/v1/sessions/"+session+"/batches/b-"+token+"-1"); !bytes.Equal(again, b) {
		t.Errorf("the interrupted batch reads back differently")
	}
}
