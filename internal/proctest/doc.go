// Package proctest provides test-only helpers for code that starts, contains and kills process
// trees: helper processes that re-execute the test binary, oracles that scan /proc for processes
// left behind, and an outer "safety" cgroup with its own pids.max for adversarial tests.
//
// # Helper processes
//
// A test package dispatches helpers from its TestMain:
//
//	func TestMain(m *testing.M) { proctest.Main(m) }
//
// Command and Argv then build command lines that run the test binary as a named helper. The
// built-in helpers are listed in the documentation of Main. Every helper that can outlive its
// parent (bomb, escaper and their descendants) expires by itself at a deadline on the
// system-wide monotonic clock, so a containment bug cannot leave work running for long.
//
// # Oracles
//
// Marker returns a unique environment entry to add to every command a test starts. Survivors
// and NoSurvivors find processes that still carry it by reading /proc/<pid>/environ; Zombies
// finds unreaped children; FDCount and Threads let a test check that it released what it took.
// NoSurvivors kills what it finds, by PID through a pidfd, after reporting it, so one failing
// test does not leak processes into the next.
//
// # Safety cgroups
//
// Safe creates cgroups named corral-safety-<random> in the v1 pids and freezer hierarchies and
// in the cgroup v2 hierarchy, whichever are mounted and writable, caps them with pids.max, and
// kills and removes everything inside when the test ends. Safety.Start starts a command inside
// them before the child runs any code of its own.
//
// # Heavy suites
//
// Heavy skips a test unless CORRAL_HEAVY=1: fork bombs, big floods, load, soak and container
// tests run in .ci/run, which sets it, and not in a plain go test ./... .
//
// The oracles and Safe work on Linux only. Elsewhere they compile, Survivors and Zombies return
// nothing, NoSurvivors logs that it cannot check, and Safe skips the test.
package proctest
