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
//
// With several tokens (Config.Tokens) each is compared, and the request's
// context records which one matched: its tenant (tenancy.go).
func (s *Server) auth(next http.Handler) http.Handler {
	if len(s.tokens) == 0 {
		return next
	}
	want := make([][sha256.Size]byte, len(s.tokens))
	for i, t := range s.tokens {
		want[i] = sha256.Sum256(t)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := authorized(r.Header.Values("Authorization"), want)
		if i < 0 {
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
		next.ServeHTTP(w, withTenant(r, i))
	})
}

// authorized returns the index of the digest in want that the Authorization
// header values match, exactly one bearer credential, or -1. Every digest is
// compared, so the time taken does not say which one matched.
func authorized(values []string, want [][sha256.Size]byte) int {
	if len(values) != 1 {
		return -1
	}
	token, ok := bearer(values[0])
	got := sha256.Sum256([]byte(token))
	match := -1
	for i := range want {
		if subtle.ConstantTimeCompare(got[:], want[i][:]) == 1 && ok {
			match = i
		}
	}
	return match
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
