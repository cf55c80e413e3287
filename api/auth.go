package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"
)

// auth requires the bearer token when one is configured. The comparison
// is of SHA-256 digests in constant time, so it takes the same time
// whatever the supplied value shares with the token, its length included.
// A refusal is 401 with WWW-Authenticate and closes the connection: a
// client without the token gets no idle connection to keep.
func (s *Server) auth(next http.Handler) http.Handler {
	if len(s.token) == 0 {
		return next
	}
	want := sha256.Sum256(s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r.Header.Values("Authorization"), want) {
			if r.Body != nil && r.Body != http.NoBody {
				// The server would read up to 256 KiB of the unread
				// body before closing; a slow sender would hold the
				// connection for the whole body timeout.
				http.NewResponseController(w).SetReadDeadline(time.Now())
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
			w.Header().Set("Connection", "close")
			writeError(w, errorf(ErrUnauthenticated, "a valid \"Authorization: Bearer <token>\" header is required"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized reports whether the Authorization header values are exactly
// one bearer credential whose SHA-256 digest is want.
func authorized(values []string, want [sha256.Size]byte) bool {
	if len(values) != 1 {
		return false
	}
	token, ok := bearer(values[0])
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && ok
}

// bearer returns the credential of an Authorization value of the Bearer
// scheme. The scheme matches in any case (RFC 7235 section 2.1: "bearer",
// "BEARER"), followed by one or more spaces.
func bearer(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimLeft(cred, " ")
	return cred, cred != ""
}
