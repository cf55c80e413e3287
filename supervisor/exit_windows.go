package supervisor

import (
	"os"

	"github.com/corral-sh/corral/killtree"
)

// exitStatus returns the process's exit code; Windows has no signals, so a
// terminated job reports its exit code (1 for TerminateJobObject).
func exitStatus(ps *os.ProcessState) (code int, sig string) {
	if ps == nil {
		return -1, ""
	}
	return ps.ExitCode(), ""
}

// shellExit returns ok false: there is no reaper on Windows.
func shellExit(*killtree.Tree) (code int, sig string, ok bool) { return 0, "", false }
