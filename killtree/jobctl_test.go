package killtree

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeJob is a job object as a state machine: processes are suspended until
// resumed, terminate marks them dying, and they stop counting as active
// after dieAfter more active() calls.
type fakeJob struct {
	procs     map[int]string // pid -> "suspended", "running", "dying"
	dying     int            // active() calls left before dying processes are gone
	dieAfter  int
	assignErr error
	resumeErr error
	log       []string
}

func newFakeJob() *fakeJob { return &fakeJob{procs: map[int]string{}} }

func (f *fakeJob) assign(pid int) error {
	f.log = append(f.log, "assign")
	if f.assignErr != nil {
		return f.assignErr
	}
	f.procs[pid] = "suspended"
	return nil
}

func (f *fakeJob) resume(pid int) error {
	f.log = append(f.log, "resume")
	if f.resumeErr != nil {
		return f.resumeErr
	}
	f.procs[pid] = "running"
	return nil
}

func (f *fakeJob) pids() ([]int, error) {
	var out []int
	for p := range f.procs {
		out = append(out, p)
	}
	return out, nil
}

func (f *fakeJob) terminate() error {
	f.log = append(f.log, "terminate")
	fresh := false
	for p, s := range f.procs {
		if s != "dying" {
			f.procs[p] = "dying"
			fresh = true
		}
	}
	if fresh { // terminating a dying process again does not delay its death
		f.dying = f.dieAfter
	}
	return nil
}

func (f *fakeJob) active() (int, error) {
	if f.dying > 0 {
		f.dying--
		return len(f.procs), nil
	}
	for p, s := range f.procs {
		if s == "dying" {
			delete(f.procs, p)
		}
	}
	return len(f.procs), nil
}

func (f *fakeJob) close() error { f.log = append(f.log, "close"); return nil }

func TestStartInJob(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name      string
		assignErr error
		resumeErr error
		wantLog   []string
		wantKill  bool
		wantState string
	}{
		// The normal path: assign before resume, the process runs inside the job.
		{name: "ok", wantLog: []string{"assign", "resume"}, wantState: "running"},
		// Assign fails: the suspended process is killed, never resumed.
		{name: "assign fails", assignErr: boom, wantLog: []string{"assign"}, wantKill: true},
		// Resume fails: the suspended process is killed.
		{name: "resume fails", resumeErr: boom, wantLog: []string{"assign", "resume"}, wantKill: true, wantState: "suspended"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := newFakeJob()
			j.assignErr, j.resumeErr = tc.assignErr, tc.resumeErr
			killed := false
			_, err := startInJob(j, func() (int, error) { return 42, nil }, func() error { killed = true; return nil })
			if (err != nil) != tc.wantKill || killed != tc.wantKill {
				t.Fatalf("err %v killed %v, want failure %v", err, killed, tc.wantKill)
			}
			if diff := cmp.Diff(tc.wantLog, j.log); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if got := j.procs[42]; got != tc.wantState {
				t.Errorf("state %q, want %q", got, tc.wantState)
			}
		})
	}
}

func TestKillJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		procs    int
		dieAfter int
		deadline time.Duration
		wantErr  bool
	}{
		// Processes die at once: one terminate, count reported.
		{name: "immediate", procs: 3, deadline: time.Second},
		// Processes take a few polls to die: killJob keeps polling.
		{name: "slow", procs: 5, dieAfter: 4, deadline: time.Second},
		// An empty job is fine.
		{name: "empty", deadline: time.Second},
		// Processes never die before the deadline: ErrNotEmpty.
		{name: "stuck", procs: 1, dieAfter: 1 << 30, deadline: 0, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := newFakeJob()
			j.dieAfter = tc.dieAfter
			for i := range tc.procs {
				j.procs[100+i] = "running"
			}
			n, err := killJob(j, time.Now().Add(tc.deadline))
			if tc.wantErr {
				if !errors.Is(err, ErrNotEmpty) {
					t.Fatalf("err %v, want ErrNotEmpty", err)
				}
				return
			}
			if err != nil || n != tc.procs {
				t.Fatalf("killJob = %d, %v; want %d, nil", n, err, tc.procs)
			}
			if a, _ := j.active(); a != 0 {
				t.Errorf("%d still active", a)
			}
		})
	}
}
