package supervisor

import (
	"fmt"
	"time"
)

// Exited jobs: each stays readable (its output by cursor, its Result)
// until its retention passes, or sooner when the caps on their number and
// their bytes need its room; the job that exited first goes first. A
// forgotten job answers ErrJobExpired with the reason.

// jobRecordBytes is what a retained job takes besides its output: the job,
// its Result's fields, its capture's structures, its entry in the table,
// and the room its small objects pin in partly used spans of the heap
// (TestJobRecordBytes measures it). The caps count it with the output, as
// allocated (internal/heapsize), so that what the exited jobs hold in all
// stays within MaxRetainedBytes.
const jobRecordBytes = 4 << 10

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
		return fmt.Sprintf("it exited and was evicted: the exited jobs' output may take at most %s, the oldest goes first",
			byteSize(t.maxBytes)), true
	}
	return fmt.Sprintf("it exited more than %s ago (the retention of an exited job)", t.retention), true
}

// retire adds j, which just exited and whose output takes footprint bytes,
// to the exited jobs, and evicts the oldest exited jobs (j too, when alone
// it exceeds the byte cap) until the caps hold. A caller already waiting
// on j still gets its Result.
func (t *jobTable) retire(j *job, footprint int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || !j.listed {
		return
	}
	j.ended, j.footprint = time.Now(), footprint
	t.exited = append(t.exited, j)
	t.exitBytes += footprint
	for len(t.exited) > 0 && (len(t.exited) > t.maxRetained || t.exitBytes > t.maxBytes) {
		r := forgotBytes
		if len(t.exited) > t.maxRetained {
			r = forgotCount
		}
		t.forgetOldestLocked(r)
	}
	t.scheduleLocked()
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
