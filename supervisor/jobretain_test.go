package supervisor

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// runJob starts req as a job, waits for its end and returns its ID.
func runJob(t *testing.T, s *Supervisor, req Request) string {
	t.Helper()
	st, err := s.StartJob(JobRequest{Request: req})
	if err != nil {
		t.Fatalf("StartJob(%q): %v", req.Command, err)
	}
	if _, err := s.WaitJob(context.Background(), st.ID, 30*time.Second); err != nil {
		t.Fatalf("WaitJob(%s): %v", st.ID, err)
	}
	return st.ID
}

// jobIDs lists the IDs of s's jobs, oldest first.
func jobIDs(s *Supervisor) []string {
	var ids []string
	for _, j := range s.Jobs() {
		ids = append(ids, j.ID)
	}
	return ids
}

// checkExpired checks that id answers ErrJobExpired (and ErrNotFound) on
// every job call, with a message containing want.
func checkExpired(t *testing.T, s *Supervisor, id, want string) {
	t.Helper()
	_, errOut := s.JobOutput(context.Background(), id, Stdout, 0, 0)
	_, errWait := s.WaitJob(context.Background(), id, time.Second)
	_, errKill := s.KillJob(id)
	_, errInfo := s.Job(id)
	for _, err := range []error{errOut, errWait, errKill, errInfo} {
		if !errors.Is(err, ErrJobExpired) || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), want) {
			t.Errorf("job %s: error %v, want ErrJobExpired saying %q", id, err, want)
		}
	}
}

// TestJobRetainedCount: past MaxRetainedJobs the job that exited first is
// forgotten and says it was evicted; a running job is never evicted; an ID
// that never existed is NOT_FOUND without the word.
func TestJobRetainedCount(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{MaxRetainedJobs: 2, Grace: NoGrace})
	long := startJob(t, s, JobRequest{Request: Request{Command: "sleep 60"}})
	req := marked(t, Request{Command: "echo hi"})
	var ids []string
	for range 4 {
		ids = append(ids, runJob(t, s, req))
	}
	want := []string{long.ID, ids[2], ids[3]}
	if got := jobIDs(s); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("jobs %v, want the running one and the last two exited %v", got, want)
	}
	for _, id := range ids[:2] {
		checkExpired(t, s, id, "at most 2 exited jobs are kept")
	}
	out, err := s.JobOutput(context.Background(), ids[3], Stdout, 0, 0)
	if err != nil || out.Data != "hi\n" || out.Result == nil {
		t.Errorf("the newest exited job: %+v, %v", out, err)
	}
	_, err = s.Job("j-0000000000000000")
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrJobExpired) {
		t.Errorf("an ID that never existed: %v, want ErrNotFound only", err)
	}
}

// TestJobRetainedBytes: the exited jobs' output stays within
// MaxRetainedBytes, the oldest going first; a job larger than the cap
// alone is forgotten at once, and whoever waited for it still gets its
// Result.
func TestJobRetainedBytes(t *testing.T) {
	t.Parallel()
	// Each job keeps about 40 KB: its 20,000-byte ring and its 20,000-byte
	// view. Two fit in 100,000 bytes, three do not.
	s := newSup(t, Config{MaxRetainedBytes: 100_000})
	req := marked(t, Request{Command: "head -c 20000 /dev/zero | tr '\\0' x"})
	var ids []string
	for range 4 {
		ids = append(ids, runJob(t, s, req))
	}
	if got := jobIDs(s); strings.Join(got, " ") != strings.Join(ids[2:], " ") {
		t.Errorf("jobs %v, want the last two %v", got, ids[2:])
	}
	for _, id := range ids[:2] {
		checkExpired(t, s, id, "may take at most 100000 bytes")
	}

	big := marked(t, Request{Command: "head -c 200000 /dev/zero | tr '\\0' y"})
	st, err := s.StartJob(JobRequest{Request: big})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.WaitJob(context.Background(), st.ID, 30*time.Second)
	if err != nil || res.StdoutInfo.TotalBytes != 200000 {
		t.Fatalf("waiting for the big job: %+v, %v", res.StdoutInfo, err)
	}
	waitFor(t, func() bool { _, err := s.Job(st.ID); return err != nil })
	checkExpired(t, s, st.ID, "may take at most 100000 bytes")
	if got := jobIDs(s); len(got) != 0 {
		t.Errorf("jobs %v after the big one, want none: it alone exceeds the cap and evicts the rest first", got)
	}
}

// TestJobRetainedMemory: 64 jobs of 1 MB output each leave the heap within
// the byte cap of where it began (before the cap, each kept about 1.1 MiB:
// its 512 KiB head capture, its 512 KiB tail ring and its views).
func TestJobRetainedMemory(t *testing.T) {
	const capBytes = 8 << 20
	s := newSup(t, Config{MaxRetainedBytes: capBytes})
	req := marked(t, Request{Command: "head -c 1000000 /dev/zero | tr '\\0' z"})
	runJob(t, s, req) // warm up the pools and the containment
	before := heapInUse()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 8 {
				runJob(t, s, req)
			}
		})
	}
	wg.Wait()
	after := heapInUse()
	retained := len(s.Jobs())
	t.Logf("heap in use %d KiB before, %d KiB after 64 jobs of 1 MB; %d jobs retained", before>>10, after>>10, retained)
	// Slack of 2 MiB for the runtime's own growth (goroutine stacks,
	// pools) under 64 jobs.
	if after-before > capBytes+2<<20 {
		t.Errorf("heap grew by %d KiB, more than the %d KiB cap", (after-before)>>10, capBytes>>10)
	}
	if retained == 0 || retained >= 64 {
		t.Errorf("%d jobs retained, want some but not all", retained)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}
