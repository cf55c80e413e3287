//go:build !linux

package supervisor

import "os"

// openStartDir returns nil: no /proc/self/fd to follow a rename through, so
// a static command's start directory is saved as given.
func openStartDir(string) *os.File { return nil }

func followDir(*os.File, string) (string, bool) { return "", false }
