package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/journal"
)

// TestJournalFaultKeepsServing cuts the journal's file under a running
// Supervisor, so that bbolt's next read faults on its mapping (SIGBUS:
// before, the process died of it; a panic inside the session table's lock
// would have held it for good). Commands in new and known sessions, a job
// and a batch, 20 at once, all answer within a bound with their output,
// no ID and a note saying they were not journaled; the log says JOURNAL
// OFFLINE once; the session table still answers.
func TestJournalFaultKeepsServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	logger := zerolog.New(zerolog.SyncWriter(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	})))
	s := newSup(t, Config{DataDir: dir, Journal: j, Logger: &logger})
	t.Cleanup(func() { j.Close() })
	for i := range 4 {
		if res := run(t, s, Request{Command: "echo before", Session: fmt.Sprintf("k%d", i)}); res.ID == "" {
			t.Fatalf("before the fault: %+v", res)
		}
	}
	path := filepath.Join(dir, "journal", journal.FileName)
	if err := os.Truncate(path, 4096*2); err != nil { // the meta pages only
		t.Fatal(err)
	}

	results := make(chan Result, 40)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			session := fmt.Sprintf("n%d", i) // new: its cwd is looked up in the journal
			if i%2 == 1 {
				session = fmt.Sprintf("k%d", i%4)
			}
			res, err := s.Run(context.Background(), marked(t, Request{Command: "echo ok", Session: session}))
			if err != nil {
				t.Errorf("command %d: %v", i, err)
			}
			results <- res
		})
	}
	wg.Go(func() {
		b, err := s.RunBatch(context.Background(), BatchRequest{Session: "k0",
			Requests: []Request{marked(t, Request{Command: "echo ok"}), marked(t, Request{Command: "echo ok"})}})
		if err != nil {
			t.Errorf("batch: %v", err)
		}
		for _, r := range b.Results {
			results <- r
		}
	})
	wg.Go(func() {
		started, err := s.Jobs().Start(JobRequest{Request: marked(t, Request{Command: "echo ok", Session: "k1"})})
		if err != nil {
			t.Errorf("job: %v", err)
			return
		}
		res, err := s.Jobs().Wait(context.Background(), started.ID, 20*time.Second)
		if err != nil {
			t.Errorf("job: %v", err)
		}
		results <- res
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("commands still running 60 s after the fault: wedged")
	}
	close(results)
	n := 0
	for res := range results {
		n++
		if res.Stdout != "ok\n" || res.ExitCode == nil || *res.ExitCode != 0 || res.ID != "" ||
			!strings.Contains(res.Stderr, "this Result was not journaled: the journal is offline") {
			t.Errorf("a Result after the fault: %+v", res)
		}
	}
	if n != 23 {
		t.Errorf("%d Results, want 23", n)
	}
	st := s.Stats()
	if !st.JournalOffline || st.JournalErrors == 0 {
		t.Errorf("stats %+v", st)
	}
	if _, ok := s.Sessions().Get("n0"); !ok {
		t.Errorf("the session table lost n0")
	}
	mu.Lock()
	if c := strings.Count(logs.String(), "JOURNAL OFFLINE"); c != 1 {
		t.Errorf("%d JOURNAL OFFLINE lines, want 1:\n%s", c, logs.String())
	}
	mu.Unlock()
	if err := j.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if _, err := journal.Open(dir, journal.Options{}); err == nil {
		t.Errorf("the cut store opened again")
	}
}
