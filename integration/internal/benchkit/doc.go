// Package benchkit holds what the benchmarks of package integration and of
// the separate peers module (github.com/corral-sh/corral/integration/peers,
// which compares go-cmd/cmd) share, so that every contender is measured the
// same way: the flood and process-tree commands, the helper processes that
// run one contender and report its peak RSS or its kill latency, and the
// benchmark bodies that start those helpers and report their figures.
//
// Kill-latency helpers run inside a proctest safety cgroup, so whatever a
// contender fails to kill is counted and then killed by its marker (and by
// the safety cgroup's cleanup) before the next iteration.
package benchkit
