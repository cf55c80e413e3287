//go:build linux && !amd64

package supervisor

// legacyWaits is empty here: arm64 and the newer architectures have only
// the generic calls (ppoll, pselect6, epoll_pwait); the legacy poll, select
// and epoll_wait of the older 32-bit ones are not recognised.
var legacyWaits = map[int]waitCall{}
