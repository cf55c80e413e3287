//go:build !linux

package proctest

import (
	"testing"
	"time"
)

// Survivors needs /proc; on this platform it finds nothing.
func Survivors(value string) []Proc { return nil }

// NoSurvivors needs /proc; on this platform it only logs that it cannot check.
func NoSurvivors(t testing.TB, value string, within time.Duration) {
	t.Helper()
	t.Logf("proctest: survivor check unavailable on this platform (marker %s)", value)
}

// Zombies needs /proc; on this platform it finds nothing.
func Zombies(parent int) []Proc { return nil }

// FDCount needs /proc; on this platform it skips the test.
func FDCount(t testing.TB) int {
	t.Helper()
	t.Skip("proctest: fd count needs /proc")
	return 0
}

// Threads needs /proc; on this platform it returns -1.
func Threads() int { return -1 }
