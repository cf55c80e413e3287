//go:build !linux

package supervisor

import "os"

// Elsewhere there is no per-thread system call to read: no job is ever
// reported waiting (docs/terminals.md), and no watch runs.
const canWatchInput = false

func findReader([]int, inputTarget, []byte) (sighting, bool) { return sighting{}, false }
func recheck(reader, inputTarget, []byte) (sighting, bool)   { return sighting{}, false }
func pipeLink(*os.File) string                               { return "" }
func pipeUnread(*os.File) int                                { return 0 }
func procArgv(int) []string                                  { return nil }
