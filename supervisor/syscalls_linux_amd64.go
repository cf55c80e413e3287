package supervisor

import "golang.org/x/sys/unix"

// legacyWaits are the waiting calls amd64 has beside the generic ones.
var legacyWaits = map[int]waitCall{
	unix.SYS_POLL:       {family: "poll", tArg: 2, tForm: tMillis},
	unix.SYS_SELECT:     {family: "select", tArg: 4, tForm: tTimeval},
	unix.SYS_EPOLL_WAIT: {family: "epoll", tArg: 3, tForm: tMillis},
}
