//go:build race

package ringtail

// raceEnabled shrinks the large-stream test: the race detector slows every
// memory access several-fold.
const raceEnabled = true
