//go:build unix

package runcmd

import "golang.org/x/sys/unix"

// signalNumber maps a signal name ("SIGKILL") to its number; unknown names
// count as SIGKILL, which is what the way down ends with.
func signalNumber(name string) int {
	if n := unix.SignalNum(name); n != 0 {
		return int(n)
	}
	return int(unix.SIGKILL)
}
