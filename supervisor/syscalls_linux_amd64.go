package supervisor

import "golang.org/x/sys/unix"

// legacyWaits are the waiting calls amd64 has beside the generic ones.
var legacyWaits = map[int]string{
	unix.SYS_POLL:       "poll",
	unix.SYS_SELECT:     "select",
	unix.SYS_EPOLL_WAIT: "epoll",
}
