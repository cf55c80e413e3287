//go:build !linux

package supervisor

import "os"

// outputPipe returns a pipe for one of the child's output streams.
func outputPipe() (r, w *os.File, err error) { return os.Pipe() }
