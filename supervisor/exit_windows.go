package supervisor

import "os"

// exitStatus returns the process's exit code; Windows has no signals, so a
// terminated job reports its exit code (1 for TerminateJobObject).
func exitStatus(ps *os.ProcessState) (code int, sig string) {
	if ps == nil {
		return -1, ""
	}
	return ps.ExitCode(), ""
}
