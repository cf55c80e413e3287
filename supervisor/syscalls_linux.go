package supervisor

import "golang.org/x/sys/unix"

// waitCall describes a system call that can wait for input on a descriptor
// (waitprobe_linux.go): its family ("read", "poll", "select", "epoll") and
// where it holds its timeout.
type waitCall struct {
	family string
	// tArg is the argument holding the timeout, in form tForm; tNone: the
	// call has none (a read waits until input comes).
	tArg  int
	tForm timeoutForm
}

// timeoutForm is how a call holds its timeout.
type timeoutForm uint8

const (
	tNone     timeoutForm = iota // no timeout
	tMillis                      // an int of milliseconds; negative: none
	tTimespec                    // a pointer to a struct timespec; NULL: none
	tTimeval                     // a pointer to a struct timeval; NULL: none
)

// syscallWait returns the waitCall of a system call number, and false for
// every call that cannot wait for input. The calls every Linux architecture
// has are here; the legacy ones only some have (poll, select, epoll_wait)
// are in legacyWaits, per architecture. The timeouts' places are the
// calls' signatures (poll(2), select(2), epoll_wait(2)).
func syscallWait(nr int) (waitCall, bool) {
	switch nr {
	case unix.SYS_READ, unix.SYS_READV, unix.SYS_PREAD64, unix.SYS_PREADV, unix.SYS_PREADV2:
		return waitCall{family: "read"}, true
	case unix.SYS_PPOLL:
		return waitCall{family: "poll", tArg: 2, tForm: tTimespec}, true
	case unix.SYS_PSELECT6:
		return waitCall{family: "select", tArg: 4, tForm: tTimespec}, true
	case unix.SYS_EPOLL_PWAIT:
		return waitCall{family: "epoll", tArg: 3, tForm: tMillis}, true
	case unix.SYS_EPOLL_PWAIT2:
		return waitCall{family: "epoll", tArg: 3, tForm: tTimespec}, true
	}
	c, ok := legacyWaits[nr]
	return c, ok
}
