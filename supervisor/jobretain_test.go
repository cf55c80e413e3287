package supervisor

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/heapsize"
)

// runJob starts req as a job, waits for its end and returns its ID.
func runJob(t *testing.T, s *Supervisor, req Request) string {
	t.Helper()
	st, err := s.Jobs().Start(JobRequest{Request: req})
	if err != nil {
		t.Fatalf("Jobs.Start(%q): %v", req.Command, err)
	}
	if _, err := s.Jobs().Wait(context.Background(), st.ID, 30*time.Second); err != nil {
		t.Fatalf("Jobs.Wait(%s): %v", st.ID, err)
	}
	return st.ID
}

// jobIDs lists the IDs of s's jobs, oldest first.
func jobIDs(s *Supervisor) []string {
	var ids []string
	for _, j := range s.Jobs().List() {
		ids = append(ids, j.ID)
	}
	return ids
}

// checkExpired checks that id answers ErrJobExpired (and ErrNotFound) on
// every job call, with a message containing want.
func checkExpired(t *testing.T, s *Supervisor, id, want string) {
	t.Helper()
	_, errOut := s.Jobs().Output(context.Background(), id, Stdout, 0, 0)
	_, errWait := s.Jobs().Wait(context.Background(), id, time.Second)
	_, errKill := s.Jobs().Kill(id)
	_, errInfo := s.Jobs().Get(id)
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
	out, err := s.Jobs().Output(context.Background(), ids[3], Stdout, 0, 0)
	if err != nil || out.Data != "hi\n" || out.Result == nil {
		t.Errorf("the newest exited job: %+v, %v", out, err)
	}
	_, err = s.Jobs().Get("j-0000000000000000")
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrJobExpired) {
		t.Errorf("an ID that never existed: %v, want ErrNotFound only", err)
	}
}

// TestJobRetainedBytes: the exited jobs' output stays within
// MaxRetainedBytes, the oldest going first; a job larger than the cap
// alone is forgotten at once, and whoever waited for it still gets its
// Result. Each job prints 4,000 bytes (within the head capture's first
// 4 KiB, however the pipe cuts them, so the figures are exact) and counts
// 13,056 bytes once exited: its ring and its view as allocated (4,096
// each), its 4 KiB record, and 1/16 of these for the runtime. While it
// runs it holds its 512 KiB ring and its 4 KiB head: 528,384 bytes. Under
// a 560,000-byte cap two exited jobs fit beside a running one and three do
// not (554,496 <= 560,000 < 567,552); once nothing runs, three fit.
func TestJobRetainedBytes(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{MaxRetainedBytes: 560_000})
	req := marked(t, Request{Command: "head -c 4000 /dev/zero | tr '\\0' x"})
	var ids []string
	for range 4 {
		ids = append(ids, runJob(t, s, req))
	}
	if got := jobIDs(s); strings.Join(got, " ") != strings.Join(ids[1:], " ") {
		t.Errorf("jobs %v, want the last three %v", got, ids[1:])
	}
	checkExpired(t, s, ids[0], "may take at most 560000 bytes")

	// Under a 100,000-byte cap a running job alone takes the room of every
	// exited one, and a job larger than the cap is forgotten as it exits.
	s = newSup(t, Config{MaxRetainedBytes: 100_000})
	first := runJob(t, s, req)
	big := marked(t, Request{Command: "head -c 200000 /dev/zero | tr '\\0' y"})
	st, err := s.Jobs().Start(JobRequest{Request: big})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Jobs().Wait(context.Background(), st.ID, 30*time.Second)
	if err != nil || res.StdoutInfo.TotalBytes != 200000 {
		t.Fatalf("waiting for the big job: %+v, %v", res.StdoutInfo, err)
	}
	waitFor(t, func() bool { _, err := s.Jobs().Get(st.ID); return err != nil })
	for _, id := range []string{first, st.ID} {
		checkExpired(t, s, id, "may take at most 100000 bytes")
	}
	if got := jobIDs(s); len(got) != 0 {
		t.Errorf("jobs %v after the big one, want none: its buffers evicted the rest while it ran, and it alone exceeds the cap", got)
	}
}

// TestJobRetainedBytesRunning: the byte cap counts the captures of the
// running jobs too. An exited job of 4,000 bytes counts 13,056 (see
// TestJobRetainedBytes); a running job that printed a line holds a 512 KiB
// tail ring and a 4 KiB head (528,384 bytes): under a 600,000-byte cap,
// with it running, exited jobs fit beside it, and none while a second job
// runs beside it too; once it is gone, they fit beside the second.
func TestJobRetainedBytesRunning(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{MaxRetainedBytes: 600_000, Grace: NoGrace})
	req := marked(t, Request{Command: "head -c 4000 /dev/zero | tr '\\0' x"})
	a := runJob(t, s, req)
	r := startJob(t, s, JobRequest{Request: Request{Command: "echo started; sleep 60"}})
	waitFor(t, func() bool {
		out, err := s.Jobs().Output(context.Background(), r.ID, Stdout, 0, 0)
		return err == nil && out.Data == "started\n"
	})
	b := runJob(t, s, req)
	if got := jobIDs(s); strings.Join(got, " ") != strings.Join([]string{r.ID, b}, " ") {
		t.Errorf("jobs %v, want the running one and the last exited %v: the running job's buffers count", got, []string{r.ID, b})
	}
	checkExpired(t, s, a, "the running jobs' included, may take at most 600000 bytes")
	if _, err := s.Jobs().Kill(r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Jobs().Wait(context.Background(), r.ID, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c := runJob(t, s, req)
	// The killed job exited too (its ring, shrunk to its line, is small):
	// b fits beside it and the running c, and c beside both once it exited.
	if got := jobIDs(s); strings.Join(got, " ") != strings.Join([]string{r.ID, b, c}, " ") {
		t.Errorf("jobs %v, want %v once nothing runs", got, []string{r.ID, b, c})
	}
}

// TestJobRetainedBytesGrowing: the byte cap holds while the running jobs'
// buffers grow, not only when a job exits. Under a 900,000-byte cap a
// running job that printed one line (528,384 bytes) leaves room for an
// exited job of 4,000 bytes (13,056); once it printed 400,000 bytes its
// head capture holds at least that much (925,696 bytes in all), and the
// exited job is evicted with no other job exiting.
func TestJobRetainedBytesGrowing(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{MaxRetainedBytes: 900_000, Grace: NoGrace})
	a := runJob(t, s, marked(t, Request{Command: "head -c 4000 /dev/zero | tr '\\0' x"}))
	r := startJob(t, s, JobRequest{Request: Request{Command: "echo started; read go; head -c 400000 /dev/zero | tr '\\0' y; echo; echo printed; sleep 60"}, Interactive: true})
	waitFor(t, func() bool {
		out, err := s.Jobs().Output(context.Background(), r.ID, Stdout, 0, 0)
		return err == nil && out.Data == "started\n"
	})
	if got := jobIDs(s); strings.Join(got, " ") != strings.Join([]string{a, r.ID}, " ") {
		t.Fatalf("jobs %v, want the exited %s beside the running one while it holds one line", got, a)
	}
	if err := s.Jobs().Input(r.ID, []byte("go\n"), false); err != nil {
		t.Fatal(err)
	}
	const printed = int64(len("started\n") + 400000 + len("\nprinted\n"))
	waitFor(t, func() bool {
		info, err := s.Jobs().Get(r.ID)
		return err == nil && info.StdoutBytes == printed
	})
	if info, err := s.Jobs().Get(r.ID); err != nil || info.State != JobRunning {
		t.Fatalf("the growing job: %+v, %v; want it running", info, err)
	}
	checkExpired(t, s, a, "the running jobs' included, may take at most 900000 bytes")
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
	retained := len(s.Jobs().List())
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

// TestJobRecordBytes: what a retained job holds besides its output (its
// record: the job, its Result, its capture's structures, its table entry,
// and the partly used spans its small objects pin) is within the
// jobRecordBytes the caps count for it. The heap after 256 retained jobs
// that print a line is compared with the heap after 256 such jobs none of
// which is retained (MaxRetainedJobs 1), so what running them leaves
// behind anyway (pools, the runtime's caches) cancels out; the line's
// ring and view are counted apart, as the caps count them.
func TestJobRecordBytes(t *testing.T) {
	const n = 256
	heapAfter := func(keep int) (inUse, objects int64) {
		s := newSup(t, Config{MaxRetainedJobs: keep})
		req := marked(t, Request{Command: "echo ok"})
		runJob(t, s, req) // warm up the pools and the containment
		before, beforeObj := heapInUse(), heapObjects()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range n / 8 {
					// With one job kept, another's exit can evict this one
					// before its Wait looks: that is the cap at work.
					st, err := s.Jobs().Start(JobRequest{Request: req})
					if err != nil {
						t.Errorf("Jobs.Start: %v", err)
						return
					}
					if _, err := s.Jobs().Wait(context.Background(), st.ID, 30*time.Second); err != nil && !(keep == 1 && errors.Is(err, ErrJobExpired)) {
						t.Errorf("Jobs.Wait(%s): %v", st.ID, err)
					}
				}
			})
		}
		wg.Wait()
		inUse, objects = heapInUse()-before, heapObjects()-beforeObj
		if got := len(s.Jobs().List()); got != min(keep, n+1) {
			t.Fatalf("%d jobs retained, want %d", got, min(keep, n+1))
		}
		s.Close()
		return inUse, objects
	}
	noneInUse, noneObj := heapAfter(1)
	allInUse, allObj := heapAfter(n + 1)
	output := 2*heapsize.Of(len("ok\n")) + heapsize.Of(len("ok")) // the ring, the view
	perObj := (allObj-noneObj)/n - output
	per := (allInUse-noneInUse)/n - output
	t.Logf("a retained job's record: %d bytes of objects, %d bytes of heap in use (spans it pins) (jobRecordBytes %d)",
		perObj, per, jobRecordBytes)
	if per > jobRecordBytes || perObj > jobRecordBytes {
		t.Errorf("a retained job's record takes %d bytes of heap (%d of objects), more than the %d the caps count",
			per, perObj, jobRecordBytes)
	}
}

// heapObjects is the bytes of live objects after a collection.
func heapObjects() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestExitedFootprint: an exited job counts its buffers as allocated (a
// 98,400-byte view takes 13 pages, 106,496 bytes), its record, and 1/16
// of these for the runtime.
func TestExitedFootprint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rings int64
		res   Result
		want  int64
	}{
		{"nothing printed", 0, Result{}, 4096 + 4096/16},
		{"a line", 16, Result{Stdout: "hi\n"}, (16 + 8 + 4096) + (16+8+4096)/16},
		{"1 MB of output", 512 << 10, Result{Stdout: strings.Repeat("x", 98400), Stderr: "oops"},
			(524288 + 106496 + 8 + 4096) + (524288+106496+8+4096)/16},
	}
	for _, tt := range tests {
		if got := exitedFootprint(tt.rings, &tt.res); got != tt.want {
			t.Errorf("%s: exitedFootprint = %d, want %d", tt.name, got, tt.want)
		}
	}
}
