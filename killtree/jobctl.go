package killtree

import (
	"errors"
	"fmt"
	"time"
)

// jobAPI is what the job tier needs from a Windows job object. winjob_windows.go
// implements it with the Win32 API; the tests drive the same logic through a
// fake on any OS.
type jobAPI interface {
	// assign puts the (suspended) process into the job.
	assign(pid int) error
	// resume resumes every thread of the process.
	resume(pid int) error
	// pids lists the processes in the job.
	pids() ([]int, error)
	// terminate kills every process in the job.
	terminate() error
	// active returns how many processes in the job are still running.
	active() (int, error)
	// close releases the job; with kill-on-close that kills what is left.
	close() error
}

// startInJob starts a process suspended (start), assigns it to the job and
// resumes it, so neither it nor any child it makes can run outside the job.
// If assigning or resuming fails, the suspended process is killed
// (killSuspended) before the error is returned: nothing is left running.
func startInJob(j jobAPI, start func() (int, error), killSuspended func() error) (int, error) {
	pid, err := start()
	if err != nil {
		return 0, err
	}
	if err := j.assign(pid); err != nil {
		return 0, errors.Join(fmt.Errorf("killtree: assign %d to job: %w", pid, err), killSuspended())
	}
	if err := j.resume(pid); err != nil {
		return 0, errors.Join(fmt.Errorf("killtree: resume %d: %w", pid, err), killSuspended())
	}
	return pid, nil
}

// killJob lists the job's processes (the count for the report), terminates
// the job, and polls until no process is active or the deadline passes. The
// job's completion-port messages are only hints ("delivery ... is not
// guaranteed", JOBOBJECT_ASSOCIATE_COMPLETION_PORT docs), so it polls the
// accounting information instead.
func killJob(j jobAPI, deadline time.Time) (int, error) {
	pids, err := j.pids()
	if err != nil {
		return 0, err
	}
	backoff := 200 * time.Microsecond
	for {
		if err := j.terminate(); err != nil {
			return len(pids), fmt.Errorf("killtree: terminate job: %w", err)
		}
		n, err := j.active()
		if err != nil {
			return len(pids), fmt.Errorf("killtree: job accounting: %w", err)
		}
		if n == 0 {
			return len(pids), nil
		}
		if time.Now().After(deadline) {
			return len(pids), fmt.Errorf("killtree: %d job processes still active: %w", n, ErrNotEmpty)
		}
		time.Sleep(backoff) // polling the accounting counter; there is no reliable event
		backoff = min(2*backoff, 20*time.Millisecond)
	}
}
