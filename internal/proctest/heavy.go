package proctest

import (
	"os"
	"testing"
)

// HeavyEnv is the environment variable that turns on the heavy suites: fork bombs, floods of
// gigabytes, load and soak tests, containers. `.ci/run` sets it; the plain
// `go test ./...` leaves it unset so that a newcomer's run stays quick on a small machine.
const HeavyEnv = "CORRAL_HEAVY"

// Heavy skips t unless CORRAL_HEAVY is set to a non-empty value other than "0". Call it first in
// a test (or benchmark) that loads the machine for more than a few seconds.
func Heavy(t testing.TB) {
	t.Helper()
	if !HeavyOn() {
		t.Skip("heavy suite: set " + HeavyEnv + "=1 to run it (.ci/run does)")
	}
}

// HeavyOn reports whether the heavy suites are turned on.
func HeavyOn() bool {
	v := os.Getenv(HeavyEnv)
	return v != "" && v != "0"
}
