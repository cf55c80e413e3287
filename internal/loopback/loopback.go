package loopback

import (
	"net"
	"net/http"
)

// Rebound reports a request that arrived on a loopback TCP address under a
// Host that is not a loopback name or address: a page whose own host name
// now resolves to 127.0.0.1 (DNS rebinding).
func Rebound(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok || !la.IP.IsLoopback() {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}
