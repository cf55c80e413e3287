package sandboxd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/corral-sh/corral/internal/loopback"
)

// fileEntry, listing, health and metadataResponse are the wire types of
// filesystem.yaml (agent-sandbox v1.0.1 spec/filesystem/v1/filesystem.yaml).
type fileEntry struct {
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	Type       string `json:"type"` // "file" or "directory"
	ModifiedAt string `json:"modified_at"`
	Mode       string `json:"mode,omitempty"`
}

type listing struct {
	Path    string      `json:"path"`
	Entries []fileEntry `json:"entries"`
}

type health struct {
	Status        string `json:"status"`
	UptimeSeconds int64  `json:"uptime_seconds"`
}

type metadataResponse struct {
	Env map[string]string `json:"env"`
}

// apiError is the error body of every non-2xx answer.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// RESTHandler serves the files API (GET, HEAD, PUT, DELETE /v1/files/{path}),
// GET /v1/health and GET /v1/metadata. With Config.Tokens every route but
// /v1/health needs "Authorization: Bearer TOKEN".
func (s *Service) RESTHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/files/{path...}", s.getFile)
	mux.HandleFunc("PUT /v1/files/{path...}", s.putFile)
	mux.HandleFunc("DELETE /v1/files/{path...}", s.deleteFile)
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("GET /v1/metadata", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, metadataResponse{Env: s.meta})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s.guard(mux)
}

// guard refuses cross-origin browser requests and DNS-rebound ones, and
// checks the bearer token.
func (s *Service) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "cross-origin browser requests are refused")
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopback.Rebound(r) {
			writeError(w, http.StatusForbidden, "PERMISSION_DENIED",
				fmt.Sprintf("host %q is not a loopback name on a loopback address", r.Host))
			return
		}
		if len(s.tokens) > 0 && r.URL.Path != "/v1/health" {
			if _, ok := s.match(r.Header.Get("Authorization")); !ok {
				writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", `a valid "Authorization: Bearer TOKEN" header is required`)
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
}

func (s *Service) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !s.ready.Load() {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "corral is shutting down")
		return
	}
	writeJSON(w, http.StatusOK, health{Status: "ok", UptimeSeconds: int64(time.Since(s.started).Seconds())})
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body) // a client gone mid-answer is not an error of ours
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Code: code, Message: msg})
}

// sensitive are the parts of a variable name that /v1/metadata withholds
// even under the prefix, as sandboxd does (its metadata.go): untrusted code
// in the sandbox can read the endpoint.
var sensitive = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CRED", "KEY", "AUTH", "BEARER", "PRIVATE", "CERT"}

// metadataEnv is the environment /v1/metadata serves: the variables named
// with prefix, those that look like credentials left out.
func metadataEnv(environ []string, prefix string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		upper := strings.ToUpper(name)
		secret := false
		for _, m := range sensitive {
			secret = secret || strings.Contains(upper, m)
		}
		if !secret {
			env[name] = value
		}
	}
	return env
}
