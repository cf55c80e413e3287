//go:build !unix || solaris || aix

package journal

import (
	"os"
	"time"
)

// lockFile does nothing here: bbolt takes its lock after verify read the
// file (LockFileEx on Windows), so a second process writing the same store
// at that moment could make verify report damage that is not there.
func lockFile(f *os.File, timeout time.Duration) error { return nil }
