//go:build !linux

package supervisor

func (s *Supervisor) openStateChannel() (stateChannel, error) { return newPipeState() }
