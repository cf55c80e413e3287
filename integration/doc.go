// Package integration holds corral's end-to-end proof: an adversarial suite
// that attacks the built corral binary (corral run --json, corral serve,
// corral mcp) and the supervisor library the way real commands and real
// mistakes do, and the benchmarks behind docs/performance.md.
//
// The package has no code of its own; everything is in its tests, which run
// on Linux (they read /proc and make cgroups). TestMain builds the corral
// binary once with `go build` into a temporary directory and dispatches the
// helper processes of internal/proctest. Every scenario ends with the
// oracles of the containment issue: no process carrying the scenario's
// marker environment variable is left, the call returned (both pipes reached
// EOF), no zombie child of the test process, and the test process's
// descriptor count back where it started.
//
// The benchmarks run only with -bench. bench.sh in this directory runs them
// together with the go-cmd/cmd comparison of the separate module in peers/
// and prints a markdown table of their figures (docs/performance.md).
package integration
