package api

import (
	"fmt"
	"net/http"
	"strings"
)

// maxPlainError bounds the plain-text error message jsonErrors keeps.
const maxPlainError = 1 << 10

// jsonErrors turns the plain-text error responses of handlers corral does
// not write (ServeMux's own 404 and 405, the MCP SDK's http.Error calls)
// and ServeMux's path-cleaning redirects into the error JSON with the same
// status (and Location), so that every HTTP error is the one envelope. Everything else, the error JSON of corral's own handlers
// included, passes through untouched.
// A 404 of ServeMux's own and every 405 get messages of corral's: "no route
// for GET /x", "method GET is not allowed on /v1/exec; allowed: POST".
func jsonErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := &errorWriter{ResponseWriter: w}
		mux.ServeHTTP(ew, r)
		if ew.status == 0 {
			return
		}
		msg := strings.TrimSpace(string(ew.text))
		switch _, pattern := mux.Handler(r); {
		case ew.status == http.StatusNotFound && pattern == "":
			msg = fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)
		case isRedirect(ew.status):
			// ServeMux's own redirect to the clean path (`//`, `/./`, a
			// trailing slash): Location is kept for clients that follow it.
			msg = fmt.Sprintf("no route for %s %s; the path is not clean, the route is %s",
				r.Method, r.URL.Path, w.Header().Get("Location"))
		case ew.status == http.StatusMethodNotAllowed:
			msg = fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path)
			if allow := w.Header().Get("Allow"); allow != "" {
				msg += "; allowed: " + allow
			}
		}
		writeJSON(w, ew.status, ErrorBody{Error: ErrorDetail{Code: statusCode(ew.status), Message: msg}})
	})
}

// isRedirect reports the statuses http.Redirect writes for ServeMux.
func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// statusCode is the wire code of an HTTP error status.
func statusCode(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusRequestTimeout:
		return CodeDeadlineExceeded
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusRequestHeaderFieldsTooLarge:
		return CodeResourceExhausted
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	if status < 500 {
		return CodeInvalidArgument
	}
	return CodeInternal
}

// errorWriter holds back a plain-text error response (an error status
// written with Content-Type text/plain, as http.Error writes it, or a
// redirect as http.Redirect writes it) and keeps
// the first maxPlainError bytes of its text; any other response goes
// straight through. Unwrap lets http.ResponseController reach the
// connection.
type errorWriter struct {
	http.ResponseWriter
	status  int    // the error status held back; 0 passes through
	text    []byte // its text, bounded
	started bool   // a response went out
}

func (e *errorWriter) WriteHeader(code int) {
	if e.started || e.status != 0 {
		return
	}
	ct := e.Header().Get("Content-Type")
	if code >= 400 && strings.HasPrefix(ct, "text/plain") ||
		isRedirect(code) && e.Header().Get("Location") != "" && (ct == "" || strings.HasPrefix(ct, "text/html")) {
		e.status = code
		return
	}
	e.started = true
	e.ResponseWriter.WriteHeader(code)
}

func (e *errorWriter) Write(p []byte) (int, error) {
	if e.status != 0 {
		if room := maxPlainError - len(e.text); room > 0 {
			e.text = append(e.text, p[:min(room, len(p))]...)
		}
		return len(p), nil
	}
	e.started = true
	return e.ResponseWriter.Write(p)
}

// Flush implements http.Flusher for handlers that check for it directly;
// a held-back error is not flushed.
func (e *errorWriter) Flush() {
	if e.status == 0 {
		e.started = true
		http.NewResponseController(e.ResponseWriter).Flush()
	}
}

func (e *errorWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }
