package proctest

import (
	"syscall"
	"unsafe"
)

// resetSignal sets sig's action to SIG_DFL behind the Go runtime's back, so that killself dies
// of the signal itself (status "signaled") even for signals Go would turn into a stack dump and
// exit code 2, or ignore. An all-zero struct sigaction means SIG_DFL, no flags and an empty
// mask on every Linux architecture; the buffer is larger than any of them.
func resetSignal(sig syscall.Signal) {
	var act [64]byte
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
}
