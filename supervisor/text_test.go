package supervisor

import "testing"

func TestStatus(t *testing.T) {
	t.Parallel()
	zero, two := 0, 2
	tests := []struct {
		res  Result
		want string
	}{
		// An exit code, with what was killed and the cwd.
		{Result{ExitCode: &two, DurationMs: 1500, Kill: KillInfo{Processes: 2, Lingering: 1}, Cwd: "/w"},
			"[exit code 2 after 1.5s; 2 process(es) killed, 1 left running by the shell; cwd /w]"},
		// A timeout.
		{Result{TimedOut: true, Signal: "SIGKILL", DurationMs: 1000}, "[timed out after 1s: stopped with SIGKILL]"},
		// An abort.
		{Result{Aborted: true, Signal: "SIGTERM"}, "[aborted after 0s: stopped with SIGTERM]"},
		// A signal nobody sent.
		{Result{Signal: "SIGSEGV", DurationMs: 3}, "[killed by SIGSEGV after 3ms]"},
		// Completed after a restart.
		{Result{Aborted: true, Interrupted: true}, "[interrupted: the server stopped before the result was recorded]"},
		// Never started (a batch's turn that did not come, a start that failed).
		{Result{Stderr: "[corral: the command did not start: x.]"}, "[did not start]"},
		// Still running as a job.
		{Result{Running: true, JobID: "j-1"}, `[still running after 0s as background job j-1: wait for its end with job_wait {"id": "j-1"}, read what it prints next with job_output {"id": "j-1"}, or stop it with job_kill]`},
		// Exit 0.
		{Result{ExitCode: &zero}, "[exit code 0 after 0s]"},
	}
	for _, tt := range tests {
		if got := tt.res.Status(); got != tt.want {
			t.Errorf("Status() = %q, want %q", got, tt.want)
		}
	}
}

// TestStatusOnHTTP: over HTTP (a batch view) a yielded command's line names
// the job routes, never an MCP tool the face does not serve.
func TestStatusOnHTTP(t *testing.T) {
	t.Parallel()
	got := Result{Running: true, JobID: "j-1"}.TextOn(FaceHTTP)
	want := "[still running after 0s as background job j-1: wait for its end with POST /v1/jobs/j-1/wait, " +
		"read what it prints next with GET /v1/jobs/j-1/output, or stop it with DELETE /v1/jobs/j-1]"
	if got != want {
		t.Errorf("TextOn(FaceHTTP) = %q, want %q", got, want)
	}
}
