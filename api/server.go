package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/supervisor"
)

// Defaults of Config.
const (
	// DefaultMaxConcurrent is how many commands may run at once.
	DefaultMaxConcurrent = 64
	// MaxBodyBytes bounds a request body; a larger one gets 413.
	MaxBodyBytes = 1 << 20
	// DefaultHeartbeat is the longest silence on a live stream before a
	// keepalive goes out.
	DefaultHeartbeat = 15 * time.Second
)

// Config configures a Server.
type Config struct {
	// Supervisor runs the commands. Required. The Server does not close it.
	Supervisor *supervisor.Supervisor
	// Token, when non-empty, is required as "Authorization: Bearer <Token>"
	// on every request except GET /healthz and GET /openapi.json. Empty
	// means no authentication.
	Token string
	// MCPTools is the tool profile the MCP servers serve: ProfileCorral
	// ("" too) or ProfileClaudeCode (see Profiles).
	MCPTools string
	// NoJournal says why the Supervisor has no journal, when it has none
	// for another reason than the lack of a data directory (another
	// process holds it); the history tool and /v1/sessions say it.
	NoJournal string
	// Tokens are more bearer tokens the server accepts, each a tenant of
	// its own: the jobs started with one are not seen with another (see
	// SharedJobs). They need Token.
	Tokens []string
	// SharedJobs lets every client see, read, write to and kill every
	// background job. By default a job belongs to the MCP session, or else
	// the token, that started it, and another client gets NOT_FOUND.
	SharedJobs bool
	// MaxConcurrent bounds the commands running at once (HTTP and MCP
	// together); 0 is DefaultMaxConcurrent. One more gets RESOURCE_EXHAUSTED.
	MaxConcurrent int
	// Logger receives one line per HTTP request; nil is silent.
	Logger *zerolog.Logger
	// Version is reported by /healthz and the MCP server's implementation info.
	Version string
	// BodyTimeout is how long a request body may take to arrive; a body
	// still incomplete then fails with 408 (ErrBodyTimeout) and the
	// connection is closed. 0 is DefaultBodyTimeout; negative is none.
	BodyTimeout time.Duration
	// Registry receives the server's metrics and is what /metrics serves;
	// nil means a fresh registry of the Server's own (never the global one).
	Registry *prometheus.Registry
	// Heartbeat is the longest a running command's live stream stays
	// silent: after it an NDJSON stream carries {"event":"keepalive"} and an
	// MCP bash call that gave a progress token gets a progress notification
	// without output. 0 is DefaultHeartbeat.
	Heartbeat time.Duration
	// MCPSessions bounds the MCP sessions open at once over streamable
	// HTTP; a new one past it gets RESOURCE_EXHAUSTED. 0 is
	// DefaultMCPSessions.
	MCPSessions int
	// MCPSessionIdle closes an MCP session that received no request for
	// this long (a running call counts as a request until it returns). 0 is
	// DefaultMCPSessionIdle.
	MCPSessionIdle time.Duration
}

// Server is corral's HTTP and MCP front end over one Supervisor. It is safe
// for concurrent use. Shutdown aborts what is running and kills the
// background jobs; the caller closes the Supervisor afterwards.
type Server struct {
	sup    *supervisor.Supervisor
	tokens [][]byte // Config.Token, then Config.Tokens; none without auth
	// sharedJobs is Config.SharedJobs.
	sharedJobs bool
	// noJournal is Config.NoJournal.
	noJournal string
	// profile is Config.MCPTools.
	profile string
	// codex maps the codex profile's session IDs to jobs.
	codex codexSessions
	// openHands is the openhands profile's running command of each client.
	openHands openHandsRunning
	// notifyOnce starts the job notifier (mcp_resources.go) at the first
	// subscription; notifier is its goroutine, ended by Shutdown.
	notifyOnce sync.Once
	notifier   sync.WaitGroup
	log        zerolog.Logger
	version    string
	reg        *prometheus.Registry
	metrics    *metrics
	slots      chan struct{} // one token per running command
	beat       time.Duration // Config.Heartbeat
	mcp        *mcp.Server   // stdio, and streamable HTTP without sessions
	// stdioSession is the corral session of ServeMCP's one connection;
	// written by ServeMCP before it serves.
	stdioSession string
	front        *mcpFront // the /mcp endpoint
	handler      http.Handler
	// toolInputs maps each MCP tool to its input type (addTool); written
	// only by New.
	toolInputs map[string]reflect.Type
	// bodyTimeout bounds the arrival of a request body; 0 is none.
	bodyTimeout time.Duration

	// base is cancelled by Shutdown; every command's context derives from it.
	base   context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool           // guarded by mu
	runs   sync.WaitGroup // commands in flight; Add only under mu while !closed
	starts sync.WaitGroup // job starts in flight; Add only under mu while !closed
}

// New returns a Server over cfg.Supervisor.
func New(cfg Config) (*Server, error) {
	if cfg.Supervisor == nil {
		return nil, errors.New("api: Config.Supervisor is nil")
	}
	if cfg.MaxConcurrent < 0 {
		return nil, fmt.Errorf("api: MaxConcurrent must be positive, got %d", cfg.MaxConcurrent)
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.Heartbeat < 0 || cfg.MCPSessions < 0 || cfg.MCPSessionIdle < 0 {
		return nil, fmt.Errorf("api: Heartbeat, MCPSessions and MCPSessionIdle must be positive, got %v, %d, %v",
			cfg.Heartbeat, cfg.MCPSessions, cfg.MCPSessionIdle)
	}
	s := &Server{
		sup:        cfg.Supervisor,
		sharedJobs: cfg.SharedJobs,
		noJournal:  cfg.NoJournal,
		profile:    cmp.Or(cfg.MCPTools, ProfileCorral),
		log:        zerolog.Nop(),
		version:    cfg.Version,
		reg:        cfg.Registry,
		slots:      make(chan struct{}, cfg.MaxConcurrent),
		beat:       cmp.Or(cfg.Heartbeat, DefaultHeartbeat),
	}
	if err := checkProfile(s.profile); err != nil {
		return nil, err
	}
	if cfg.Token == "" && len(cfg.Tokens) > 0 {
		return nil, errors.New("api: Config.Tokens needs Config.Token")
	}
	for _, t := range append([]string{cfg.Token}, cfg.Tokens...) {
		if t == "" && len(cfg.Tokens) > 0 {
			return nil, errors.New("api: an empty token in Config.Tokens")
		}
		if t != "" {
			s.tokens = append(s.tokens, []byte(t))
		}
	}
	switch {
	case cfg.BodyTimeout == 0:
		s.bodyTimeout = DefaultBodyTimeout
	case cfg.BodyTimeout > 0:
		s.bodyTimeout = cfg.BodyTimeout
	}
	if cfg.Logger != nil {
		s.log = *cfg.Logger
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(s.reg)
	if err != nil {
		return nil, err
	}
	journalErrors := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "corral_journal_write_errors_total",
		Help: "Journal writes that failed (a full disk, an I/O error); the commands' Results went out without them.",
	}, func() float64 { return float64(cfg.Supervisor.Stats().JournalErrors) })
	if err := s.reg.Register(journalErrors); err != nil {
		return nil, fmt.Errorf("api: register metrics: %w", err)
	}
	if err := registerGauges(s.reg, cfg.Supervisor, cfg.Version); err != nil {
		return nil, err
	}
	s.metrics = m
	s.base, s.cancel = context.WithCancel(context.Background())
	s.mcp = s.newMCPServer(faceStdio)
	s.front = s.newMCPFront(cmp.Or(cfg.MCPSessions, DefaultMCPSessions), cmp.Or(cfg.MCPSessionIdle, DefaultMCPSessionIdle))
	s.handler = s.routes()
	return s, nil
}

// Handler is the HTTP API: /v1/exec, /v1/jobs..., /v1/read, /v1/grep,
// /v1/sessions..., /healthz, /metrics, /openapi.json (the contract of all
// of them, OpenAPI) and the MCP endpoint /mcp.
func (s *Server) Handler() http.Handler { return s.handler }

// MCPServer is the MCP server with corral's tools, shared by the stdio
// transport (corral mcp) and the /mcp endpoint.
func (s *Server) MCPServer() *mcp.Server { return s.mcp }

// Shutdown refuses new commands and jobs, aborts the running commands,
// ends the MCP sessions and kills every running background job of the
// Supervisor (their trees are killed), and waits until all of them ended or ctx is done. It does not
// close the Supervisor. Calling it more than once is harmless.
func (s *Server) Shutdown(ctx context.Context) error {
	s.abort()
	s.front.closeSessions()
	if err := s.killJobs(ctx); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		s.runs.Wait()
		s.notifier.Wait()
		s.metrics.watchers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("api: shutdown: %w", ctx.Err())
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /openapi.json", s.openAPI)
	// OpenMetrics when the Accept header asks for it (docs/server.md#metrics).
	mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})))
	mux.Handle("POST /v1/exec", s.auth(http.HandlerFunc(s.exec)))
	mux.Handle("POST /v1/batch", s.auth(http.HandlerFunc(s.batch)))
	mux.Handle("POST /v1/jobs", s.auth(http.HandlerFunc(s.createJob)))
	mux.Handle("GET /v1/jobs", s.auth(http.HandlerFunc(s.listJobs)))
	mux.Handle("GET /v1/jobs/{id}", s.auth(http.HandlerFunc(s.getJob)))
	mux.Handle("POST /v1/jobs/{id}/resize", s.auth(http.HandlerFunc(s.resizeJob)))
	mux.Handle("GET /v1/jobs/{id}/screen", s.auth(http.HandlerFunc(s.jobScreen)))
	mux.Handle("GET /v1/jobs/{id}/output", s.auth(http.HandlerFunc(s.jobOutput)))
	mux.Handle("POST /v1/jobs/{id}/stdin", s.auth(http.HandlerFunc(s.jobStdin)))
	mux.Handle("POST /v1/jobs/{id}/wait", s.auth(http.HandlerFunc(s.waitJob)))
	mux.Handle("DELETE /v1/jobs/{id}", s.auth(http.HandlerFunc(s.deleteJob)))
	mux.Handle("GET /v1/events", s.auth(http.HandlerFunc(s.events)))
	mux.Handle("POST /v1/read", s.auth(http.HandlerFunc(s.read)))
	mux.Handle("POST /v1/grep", s.auth(http.HandlerFunc(s.grep)))
	mux.Handle("GET /v1/sessions", s.auth(http.HandlerFunc(s.listSessions)))
	mux.Handle("GET /v1/sessions/{id}", s.auth(http.HandlerFunc(s.getSession)))
	mux.Handle("GET /v1/sessions/{id}/results", s.auth(http.HandlerFunc(s.listResults)))
	mux.Handle("GET /v1/sessions/{id}/results/{rid}", s.auth(http.HandlerFunc(s.getResult)))
	mux.Handle("GET /v1/sessions/{id}/batches/{bid}", s.auth(http.HandlerFunc(s.getBatch)))
	mux.Handle("DELETE /v1/sessions/{id}", s.auth(http.HandlerFunc(s.deleteSession)))
	mux.Handle("/mcp", s.auth(strictBody(s.front)))
	return s.logRequests(s.bodyDeadline(s.guard(jsonErrors(mux))))
}

// Health is the body of GET /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	Tier    string `json:"tier"`
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Health{Status: "ok", Version: s.version, Tier: string(s.sup.Bounds().Tier)})
}

// acquire takes a command slot and registers the run with Shutdown. It
// returns the command's context (cancelled by ctx or by Shutdown) and the
// release function, or at once ErrBusy when no slot is free (counted as
// rejected under face) and ErrUnavailable when the server is shutting
// down.
func (s *Server) acquire(ctx context.Context, face string) (context.Context, func(), error) {
	return s.acquireN(ctx, face, 1)
}

// acquireN is acquire for n slots at once (a batch), all or none: ErrBusy
// when fewer than n are free. The running gauge counts the n slots.
func (s *Server) acquireN(ctx context.Context, face string, n int) (context.Context, func(), error) {
	for i := range n {
		select {
		case s.slots <- struct{}{}:
			continue
		default:
		}
		for range i {
			<-s.slots
		}
		s.metrics.outcome(face, OutcomeRejected)
		if n == 1 {
			return nil, nil, errorf(ErrBusy, "%d commands are running, the most this server allows; retry later",
				cap(s.slots))
		}
		return nil, nil, errorf(ErrBusy, "the batch needs %d command slots (its concurrency) and fewer are free "+
			"of the %d this server allows; retry later, or lower the concurrency", n, cap(s.slots))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for range n {
			<-s.slots
		}
		return nil, nil, errorf(ErrUnavailable, "the server is shutting down")
	}
	s.runs.Add(1)
	s.mu.Unlock()
	rctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.base, cancel)
	s.metrics.running.Add(float64(n))
	return rctx, func() {
		stop()
		cancel()
		s.metrics.running.Sub(float64(n))
		for range n {
			<-s.slots
		}
		s.runs.Done()
	}, nil
}

// run runs req under a slot, recording its metrics under face. A command
// that yielded and goes on as a job is counted when the job ends.
func (s *Server) run(ctx context.Context, face string, req supervisor.Request) (supervisor.Result, error) {
	rctx, release, err := s.acquire(ctx, face)
	if err != nil {
		return supervisor.Result{}, err
	}
	defer release()
	begin := time.Now()
	res, err := s.sup.Run(rctx, req)
	if err == nil && res.Running {
		s.metrics.watch(s.sup.Jobs(), face, res.JobID)
		return res, nil
	}
	s.metrics.observe(face, res, err, time.Since(begin))
	return res, err
}
