package loopback

import (
	"net"
	"net/http"
	"strings"
)

// Rebound reports a request that arrived on a loopback TCP address under a
// Host that is not a loopback name or address: a page whose own host name
// now resolves to 127.0.0.1 (DNS rebinding).
func Rebound(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok || !la.IP.IsLoopback() {
		return false
	}
	return !loopbackHost(r.Host)
}

// loopbackHost reports whether a Host header names loopback: "localhost" in
// any case, with or without the root's trailing dot ("localhost."), or a
// loopback address, an IPv6 one in brackets ("[::1]"); each with or without
// a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1] // "[::1]" without a port
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
