package proctest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
)

// ErrNoCgroups reports that no cgroup with a pids limit could be made on this machine; Safe
// skips the test with it.
var ErrNoCgroups = errors.New("proctest: no writable cgroup with a pids controller")

// safetyName returns a fresh corral-safety-<random> name.
func safetyName() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24 and later).
	return "corral-safety-" + hex.EncodeToString(b[:])
}
