package supervisor

import (
	"fmt"
	"time"

	"github.com/corral-sh/corral/internal/heapsize"
)

// Exited jobs: each stays readable (its output by cursor, its Result)
// until its retention passes, or sooner when the caps on their number and
// their bytes need its room; the job that exited first goes first. A
// forgotten job answers ErrJobExpired with the reason.

// jobRecordBytes is what a retained job takes besides its output: the job,
// its Result's fields, its capture's structures, its entry in the table,
// and the room its small objects pin in partly used spans of the heap
// (TestJobRecordBytes measures it).
const jobRecordBytes = 4 << 10

// heapOverhead: the caps count an exited job at 1/heapOverhead more than
// its buffers and record, for what the Go runtime spends on a heap holding
// them and keeps after the burst of commands that filled it (its metadata,
// span structures, grown stacks, the free room of partly used spans: none of
// it is in the heap's objects, all of it is in the server's RSS). Measured
// with `corral serve` after 1,000 jobs of 1 MB output, 8 at a time
// (TestFigureRetainedJobsRSS): about 3% of the retained heap plus 0.8 MiB
// that the same burst leaves when no job is retained; 1/16 of 64 MiB covers
// both (a much smaller cap leaves that 0.8 MiB a larger share).
const heapOverhead = 16

// exitedFootprint is what the caps count for an exited job whose tail rings
// take rings bytes (shrunk, as allocated) and whose Result is res: the
// rings, the Result's views as allocated (internal/heapsize), the record,
// and the runtime's overhead on them, so that the exited jobs hold at most
// MaxRetainedBytes of the server's memory in all.
func exitedFootprint(rings int64, res *Result) int64 {
	n := rings + heapsize.Of(len(res.Stdout)) + heapsize.Of(len(res.Stderr)) + jobRecordBytes
	return n + n/heapOverhead
}

// forgetReason says why an exited job was forgotten.
type forgetReason uint8

const (
	forgotRetention forgetReason = iota // its retention passed
	forgotCount                         // evicted for MaxRetainedJobs
	forgotBytes                         // evicted for MaxRetainedBytes
)

// forgetLog remembers the last forgottenIDs forgotten jobs and why.
type forgetLog struct {
	why  map[string]forgetReason
	ring []string // the IDs in why; once full, ring[next] is the oldest
	next int
}

func (f *forgetLog) add(id string, r forgetReason) {
	if f.why == nil {
		f.why = make(map[string]forgetReason)
	}
	if len(f.ring) < forgottenIDs {
		f.ring = append(f.ring, id)
	} else {
		delete(f.why, f.ring[f.next])
		f.ring[f.next] = id
		f.next = (f.next + 1) % forgottenIDs
	}
	f.why[id] = r
}

// why reports whether the table forgot id, and how to say why.
func (t *jobTable) whyLocked(id string) (string, bool) {
	r, ok := t.forgotten.why[id]
	if !ok {
		return "", false
	}
	switch r {
	case forgotCount:
		return fmt.Sprintf("it exited and was evicted: at most %d exited jobs are kept, the oldest goes first", t.maxRetained), true
	case forgotBytes:
		return fmt.Sprintf("it exited and was evicted: the jobs' output, the running jobs' included, may take at most %s, the oldest exited job goes first",
			byteSize(t.maxBytes)), true
	}
	return fmt.Sprintf("it exited more than %s ago (the retention of an exited job)", t.retention), true
}

// retire adds j, which just exited and whose output takes footprint bytes,
// to the exited jobs, and evicts the oldest exited jobs (j too, when alone
// it exceeds the byte cap) until the caps hold (evictLocked). The byte
// cap counts the captures the running jobs hold too, here and each time
// they grow (reclaim): a burst of jobs whose output fills their buffers
// takes the room of the exited ones, so that what all the jobs hold stays
// within MaxRetainedBytes, which the servers' soft memory limit is made of
// (docs/memory.md). A caller already waiting on j still gets its Result.
func (t *jobTable) retire(j *job, footprint int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || !j.listed {
		return
	}
	j.ended, j.footprint = time.Now(), footprint
	t.exited = append(t.exited, j)
	t.exitBytes += footprint
	t.evictLocked()
	t.scheduleLocked()
}

// reclaim evicts the oldest exited jobs until the caps hold again, after a
// running job's buffers grew (retained.grew): the byte cap counts what the
// running jobs hold, so it is kept each time that grows, not only when a
// job exits. A running job is never evicted: running jobs alone may hold
// more than the cap, and then no exited job is kept.
func (t *jobTable) reclaim() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.evictLocked()
	}
}

// evictLocked forgets the oldest exited jobs while there are more than
// MaxRetainedJobs, or while they and the running jobs' buffers take more
// than MaxRetainedBytes.
func (t *jobTable) evictLocked() {
	live := t.liveBytesLocked()
	for len(t.exited) > 0 && (len(t.exited) > t.maxRetained || t.exitBytes+live > t.maxBytes) {
		r := forgotBytes
		if len(t.exited) > t.maxRetained {
			r = forgotCount
		}
		t.forgetOldestLocked(r)
	}
}

// liveBytesLocked is what the running jobs' captures take now (their
// buffers as allocated). A job leaves t.live before it releases its
// captures, under t.mu, so none is read while it is released.
func (t *jobTable) liveBytesLocked() int64 {
	var n int64
	for j := range t.live {
		n += j.out.held() + j.err.held()
	}
	return n
}

// forgetOldestLocked forgets the job that exited first.
func (t *jobTable) forgetOldestLocked(r forgetReason) {
	j := t.exited[0]
	t.exited[0] = nil
	t.exited = t.exited[1:]
	t.exitBytes -= j.footprint
	delete(t.jobs, j.id)
	t.forgotten.add(j.id, r)
}

// scheduleLocked arms the sweep for the retention of the oldest exited
// job, unless it is armed already.
func (t *jobTable) scheduleLocked() {
	if t.closed || t.sweep != nil || len(t.exited) == 0 {
		return
	}
	t.sweep = time.AfterFunc(time.Until(t.exited[0].ended.Add(t.retention)), t.expire)
}

// expire forgets the exited jobs whose retention passed and re-arms the
// sweep for the next one.
func (t *jobTable) expire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep = nil
	if t.closed {
		return
	}
	now := time.Now()
	for len(t.exited) > 0 && !now.Before(t.exited[0].ended.Add(t.retention)) {
		t.forgetOldestLocked(forgotRetention)
	}
	t.scheduleLocked()
}

// byteSize spells n in MiB when it is a whole number of them.
func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
