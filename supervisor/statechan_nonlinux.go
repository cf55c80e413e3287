//go:build !linux

package supervisor

import (
	"errors"
	"os"
)

// openStateChannel returns the pipe channel, which has no start gate.
func (s *Supervisor) openStateChannel(gated bool) (stateChannel, bool, error) {
	return pipeChannel()
}

// sharedScript: the start-up scripts of other systems are pipes, made per
// command (pipeState); an untracked command is never gated there.
func (t *sessionTable) sharedScript(tracked, gated bool) (*os.File, error) {
	return nil, errors.ErrUnsupported
}
