// Package peers benchmarks github.com/go-cmd/cmd against the same floods,
// `true` and 1,000-process tree that package integration runs through
// corral and os/exec, with the same benchmark kit
// (integration/internal/benchkit), so that bench.sh can put the figures of
// both modules in one table. It is a module of its own so that corral's
// go.mod never depends on go-cmd/cmd.
package peers
