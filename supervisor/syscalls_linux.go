package supervisor

import "golang.org/x/sys/unix"

// syscallFamily names the family of a system call number that can wait for
// input on a descriptor (waitprobe_linux.go): "read", "poll", "select",
// "epoll"; "" for every other call. The calls every Linux architecture has
// are here; the legacy ones only some have (poll, select, epoll_wait) are in
// legacyWaits, per architecture.
func syscallFamily(nr int) string {
	switch nr {
	case unix.SYS_READ, unix.SYS_READV, unix.SYS_PREAD64, unix.SYS_PREADV, unix.SYS_PREADV2:
		return "read"
	case unix.SYS_PPOLL:
		return "poll"
	case unix.SYS_PSELECT6:
		return "select"
	case unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2:
		return "epoll"
	}
	return legacyWaits[nr]
}
