//go:build unix && !linux

package proctest

import "syscall"

// resetSignal is a no-op here: killself then gets the Go runtime's handling of sig, which
// dies of SIGKILL, SIGTERM, SIGINT and SIGHUP but turns some other signals into exit code 2.
func resetSignal(sig syscall.Signal) {}
