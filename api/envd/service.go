package envd

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/corral-sh/corral/api/envd/filesystempb/filesystempbconnect"
	"github.com/corral-sh/corral/api/envd/processpb"
	"github.com/corral-sh/corral/api/envd/processpb/processpbconnect"
	"github.com/corral-sh/corral/internal/confine"
	"github.com/corral-sh/corral/internal/loopback"
	"github.com/corral-sh/corral/spill"
	"github.com/corral-sh/corral/supervisor"
)

// Version is the envd version corral reports in X-Envd-Version. The e2b
// SDKs (JS 2.51) gate process features on 0.3.0 (stdin), 0.4.0 (a default
// user) and 0.5.2 (CloseStdin), all served here; from 0.5.7 on they gate
// filesystem features (octet-stream uploads, file metadata, watch options)
// that corral's filesystem does not serve, so they keep to multipart
// uploads.
const Version = "0.5.2"

// Wire names envd uses.
const (
	accessTokenHeader = "X-Access-Token"
	versionHeader     = "X-Envd-Version"
	keepaliveHeader   = "Keepalive-Ping-Interval"
	// defaultKeepalive is envd's keepalive interval without the header.
	defaultKeepalive = 90 * time.Second
	// maxMessageBytes bounds one request message (SendInput's data).
	maxMessageBytes = 16 << 20
	// label names the spill files of envd processes.
	label = "envd"
)

// Config configures a Service.
type Config struct {
	// Supervisor runs the processes. Required.
	Supervisor *supervisor.Supervisor
	// Token, when non-empty, is required in X-Access-Token on every request
	// but GET /health.
	Token string
	// RootDir is the root of the filesystem service and the /files routes:
	// every path is confined beneath it. "" is the home directory of the
	// user commands run as; with neither, the filesystem answers
	// Unimplemented.
	RootDir string
	// Observe, when set, is called once for each process this face
	// started or refused: with its Result once it ended (from a goroutine
	// that lives as long as the process; the supervisor's Close ends every
	// process), or with the error that refused it. corral serve counts
	// corral_commands_total{face="envd"} with it (api.Server.Observer). It
	// must be safe for concurrent use.
	Observe func(supervisor.Result, error)
}

// Service is the envd face of one Supervisor. It is safe for concurrent
// use.
type Service struct {
	sup   *supervisor.Supervisor
	token [sha256.Size]byte
	auth  bool
	user  string // the login name commands run as
	home  string // its home directory, "" when unknown
	procs table
	root  *confine.Root // nil: no filesystem
	// observe is Config.Observe; nil: none.
	observe supervisor.Observer
}

// New returns a Service over cfg.Supervisor.
func New(cfg Config) (*Service, error) {
	if cfg.Supervisor == nil {
		return nil, errors.New("envd: no supervisor")
	}
	s := &Service{sup: cfg.Supervisor, observe: cfg.Observe}
	if cfg.Token != "" {
		s.token, s.auth = sha256.Sum256([]byte(cfg.Token)), true
	}
	s.user = cfg.Supervisor.Bounds().User
	if s.user != "" {
		if u, err := user.Lookup(s.user); err == nil {
			s.home = u.HomeDir
		}
	} else {
		if u, err := user.Current(); err == nil {
			s.user, s.home = u.Username, u.HomeDir
		}
		if h, err := os.UserHomeDir(); err == nil {
			s.home = h
		}
	}
	s.procs.init()
	owner := cfg.Supervisor.Bounds().User
	root, err := openRoot(cfg.RootDir, s.home, owner)
	if err != nil {
		return nil, err
	}
	s.root = root
	return s, nil
}

// Close releases the filesystem root. It kills nothing: the processes are
// the supervisor's jobs.
func (s *Service) Close() error {
	if s.root == nil {
		return nil
	}
	return s.root.Close()
}

// Handler serves the Connect service process.Process and GET /health.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	// Responses are never compressed: output is streamed as fast as it
	// comes, and gzip would cost more CPU than the command (compressed
	// requests are still read).
	path, h := processpbconnect.NewProcessHandler(&rpc{s: s}, connect.WithReadMaxBytes(maxMessageBytes),
		connect.WithCompressMinBytes(math.MaxInt32))
	mux.Handle(path, h)
	fsys := files{s: s}
	path, h = filesystempbconnect.NewFilesystemHandler(fsys, connect.WithReadMaxBytes(maxMessageBytes),
		connect.WithCompressMinBytes(math.MaxInt32))
	mux.Handle(path, h)
	mux.HandleFunc("GET /files", fsys.getFile)
	mux.HandleFunc("POST /files", fsys.postFile)
	mux.HandleFunc("/", notServed)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
	})
	return s.guard(mux)
}

// guard sets the version header, refuses cross-origin browser requests and
// DNS-rebound ones, and checks the access token.
func (s *Service) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin browser requests are refused", http.StatusForbidden)
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(versionHeader, Version)
		if loopback.Rebound(r) {
			http.Error(w, fmt.Sprintf("host %q is not a loopback name on a loopback address", r.Host), http.StatusForbidden)
			return
		}
		if s.auth && !(r.Method == http.MethodGet && r.URL.Path == "/health") {
			got := sha256.Sum256([]byte(r.Header.Get(accessTokenHeader)))
			if subtle.ConstantTimeCompare(got[:], s.token[:]) != 1 {
				writeUnauthenticated(w)
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
}

// writeUnauthenticated answers 401 with a Connect error body, which Connect
// clients of every protocol read as Unauthenticated.
func writeUnauthenticated(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, `{"code":"unauthenticated","message":"a valid %s header is required"}`, accessTokenHeader)
}

// requestUser reads envd's "Authorization: Basic base64(user:)": the user
// the process runs as. "" (no header, or the user commands run as anyway)
// is the supervisor's user; another is passed on to the supervisor, which
// runs the command as that user only when it runs as root (and never as
// root when it was told to run commands as another user).
func (s *Service) requestUser(h http.Header) (string, error) {
	v := h.Get("Authorization")
	if v == "" {
		return "", nil
	}
	scheme, cred, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return "", connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("authorization must be Basic with the user name, got scheme %q", scheme))
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("authorization: the Basic credentials are not base64"))
	}
	name, _, _ := strings.Cut(string(raw), ":")
	if name == s.user {
		return "", nil
	}
	return name, nil
}

// dir resolves envd's cwd for a process of the named user ("" the
// supervisor's): "~" and "~/..." are the user's home; none is the home
// too, as in envd.
func (s *Service) dir(cwd *string, name string) string {
	home := s.home
	if name != "" {
		home = ""
		if u, err := user.Lookup(name); err == nil {
			home = u.HomeDir
		}
	}
	if cwd == nil || *cwd == "" {
		if home != "" {
			if fi, err := os.Stat(home); err == nil && fi.IsDir() {
				return home
			}
		}
		return ""
	}
	c := *cwd
	if home != "" && (c == "~" || strings.HasPrefix(c, "~/")) {
		return filepath.Join(home, c[1:])
	}
	return c
}

// session maps an envd tag to a corral session: the tag itself when it is a
// valid session name, else "envd-" and the first 16 hex digits of its
// SHA-256; no tag is the default session.
func session(tag string) string {
	if tag == "" {
		return ""
	}
	if spill.ValidateName("session", tag) == nil {
		return tag
	}
	sum := sha256.Sum256([]byte(tag))
	return "envd-" + hex.EncodeToString(sum[:8])
}

// argv is the job's program and arguments, run as envd runs them: the
// program itself is the process (no shell around it), so the pid the start
// event reports is the program's and a signal reaches it first.
func argv(cfg *processpb.ProcessConfig) []string {
	return append([]string{cfg.GetCmd()}, cfg.GetArgs()...)
}

// lifetime is the process's lifetime: what is left of the stream's
// deadline (Connect-Timeout-Ms), within 1 s and the supervisor's longest
// job lifetime; without a deadline, that longest lifetime.
func (s *Service) lifetime(ctx context.Context) time.Duration {
	longest := s.sup.Bounds().MaxJobLifetime
	dl, ok := ctx.Deadline()
	if !ok {
		return longest
	}
	return min(max(supervisor.MinTimeout, time.Until(dl)), longest)
}

// keepalive is the interval the Keepalive-Ping-Interval header asks for, in
// seconds; envd's 90 s without it or when it is not a positive number.
func keepalive(h http.Header) time.Duration {
	var n int
	if _, err := fmt.Sscanf(h.Get(keepaliveHeader), "%d", &n); err != nil || n <= 0 {
		return defaultKeepalive
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// toConnect turns a supervisor error into a Connect error with a code the
// SDKs branch on and a message without Go package prefixes.
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	return connect.NewError(connectCodes[supervisor.Classify(err)], errors.New(supervisor.Reason(err)))
}

// connectCodes are the Connect codes of the supervisor's error classes
// (every class is listed: TestConnectCodes).
var connectCodes = map[supervisor.Class]connect.Code{
	supervisor.ClassInternal:     connect.CodeInternal,
	supervisor.ClassInvalid:      connect.CodeInvalidArgument,
	supervisor.ClassNotFound:     connect.CodeNotFound,
	supervisor.ClassExhausted:    connect.CodeResourceExhausted,
	supervisor.ClassStillRunning: connect.CodeDeadlineExceeded,
	supervisor.ClassUnavailable:  connect.CodeUnavailable,
	supervisor.ClassCanceled:     connect.CodeCanceled,
	supervisor.ClassDeadline:     connect.CodeDeadlineExceeded,
}
