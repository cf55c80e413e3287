package api

import (
	"net/http"

	"github.com/corral-sh/corral/internal/loopback"
)

// guard refuses the two ways a web page could reach a server on loopback:
// a cross-origin browser request (CSRF: a page POSTing to 127.0.0.1) and a
// DNS-rebound one (a page whose own host name now resolves to 127.0.0.1).
// Both matter most without a token, the default on loopback. Refusals are
// 403 with the error JSON, code PERMISSION_DENIED.
func (s *Server) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(ErrForbidden, "cross-origin browser requests are refused"))
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopback.Rebound(r) {
			writeError(w, errorf(ErrForbidden, "host %q is not a loopback name on a loopback address", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	}))
}
