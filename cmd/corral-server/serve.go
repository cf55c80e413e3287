package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/api/envd"
	"github.com/corral-sh/corral/cmd/internal/cli"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/supervisor"
)

const serveUsage = `Usage: corral serve [flags]

Serves corral's HTTP API: POST /v1/exec (NDJSON live events with
"Accept: application/x-ndjson"), background jobs (POST and GET /v1/jobs,
GET /v1/jobs/{id}/output, POST /v1/jobs/{id}/stdin and /wait,
DELETE /v1/jobs/{id}), POST /v1/read, POST /v1/grep, sessions and their
history (GET /v1/sessions, GET /v1/sessions/{id},
GET /v1/sessions/{id}/results?after=&limit=, GET
/v1/sessions/{id}/results/{rid}, DELETE /v1/sessions/{id}), GET /healthz,
GET /metrics, and MCP over streamable HTTP at /mcp.

Every Result is journaled in DATA-DIR/journal/journal.db before it is
returned; a second serve on the same data directory fails at once, and a
damaged journal file stops the start with an error that says how to move
it aside.

Every request but /healthz needs "Authorization: Bearer TOKEN". The token
comes from --token-file, else $CORRAL_TOKEN, else serve generates one, writes
it to DATA-DIR/token (mode 0600, a new one at each start) and logs that path.
--token works too but every local process can read a command line.
--insecure-no-auth serves without a token, on loopback or a unix socket only.
The token never reaches a command's environment, and the server is
non-dumpable on Linux, so a command running as the same user cannot read the
server's environment or memory; with --run-as USER (as root) commands run as
that user and cannot read the token file either. SIGTERM or SIGINT stops
accepting, aborts the running commands and kills every background job (their
trees are killed) and exits 0.

Connections: at most --max-connections are open at once (the request of
one more is answered 503 UNAVAILABLE with Retry-After: 1); a connection gets
10 s to send a request's headers, --body-timeout for its body, and
--idle-timeout between requests; a 401 closes it. Exited background jobs
stay readable for 10 minutes, at most --max-retained-jobs of them and
--max-retained-bytes of their memory; past a cap the oldest is forgotten
(404 NOT_FOUND saying it expired).

--envd ADDR also serves the E2B envd process and filesystem services
(Connect, JSON and protobuf, at /process.Process/* and /filesystem.Filesystem/*),
GET and POST /files, and GET /health on ADDR, so the E2B SDKs in debug mode
drive corral; every process is a background job, and every path is confined
beneath --root-dir (default: the home of the user commands run as). It requires
envd's "X-Access-Token: TOKEN" when the token was given (--token,
--token-file or $CORRAL_TOKEN); with a generated token or none, ADDR must be
loopback or a unix socket.

--sandboxd ADDR and --sandboxd-rest ADDR serve Kubernetes agent-sandbox's
sandboxd: gRPC process.v1.ProcessService, and the REST files API with
/v1/health and /v1/metadata, beneath --root-dir (docs/sandboxd.md). Auth as
for --envd, with "authorization: Bearer TOKEN".

Flags:
`

// Timeout hints: how a timed-out command's note points at background jobs.
const (
	serveTimeoutHint = "or start it as a background job (POST /v1/jobs; MCP: bash with background: true)"
	mcpTimeoutHint   = "or start it as a background job (bash with background: true, then read it with job_output)"
)

// serverFlags are the flags shared by corral serve and corral mcp.
type serverFlags struct {
	listen         string
	envd           string
	sandboxd       string
	sandboxdREST   string
	rootDir        string
	token          string
	tokenFile      string
	insecureNoAuth bool
	runAs          string
	allowUsers     []string // --allow-user
	maxConcurrent  int
	dataDir        string
	containment    string
	reaper         bool
	maxConnections int
	idleTimeout    float64
	bodyTimeout    float64
	retainedJobs   int
	retainedBytes  string
	grace          float64
	logFormat      string
	logLevel       string
	limits         limitFlags
	journalMax     int
	journalIdle    time.Duration
	sharedJobs     bool
	tools          string
}

func (m *Main) serverFlagSet(name, usageText string, f *serverFlags, network bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if network {
		fs.StringVar(&f.listen, "listen", "127.0.0.1:7823", "`address` to listen on: host:port, or unix:/path/to.sock (mode 0600)")
		if name == "corral serve" {
			fs.StringVar(&f.envd, "envd", "", "also serve the E2B envd process API (Connect) and GET /health on `address` (envd's port is 49983); "+
				"it checks X-Access-Token only with a token given by --token, --token-file or $CORRAL_TOKEN, else it must be loopback")
		}
		if name == "corral serve" {
			fs.StringVar(&f.sandboxd, "sandboxd", "", "also serve Kubernetes agent-sandbox's sandboxd process API (gRPC process.v1.ProcessService) on `address` "+
				"(sandboxd's is :9090; needs --root-dir); it checks \"authorization: Bearer\" only with a token given by --token, --token-file or $CORRAL_TOKEN, else it must be loopback")
			fs.StringVar(&f.sandboxdREST, "sandboxd-rest", "", "also serve sandboxd's REST API (/v1/files, /v1/health, /v1/metadata) on `address` (sandboxd's is :8080; needs --root-dir)")
			fs.StringVar(&f.rootDir, "root-dir", "", "the sandbox root of --sandboxd and --sandboxd-rest (processes start in it) and of --envd's filesystem "+
				"(default: the home of the user commands run as): the files APIs are confined beneath this `directory`")
		}
		fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from `file` (a regular file of this user's, mode 0600 or stricter)")
		fs.StringVar(&f.token, "token", "", "bearer `token` (visible to every local process: prefer --token-file or $CORRAL_TOKEN)")
		fs.BoolVar(&f.insecureNoAuth, "insecure-no-auth", false, "serve without a token (loopback or a unix socket only): every local process can run commands")
		fs.IntVar(&f.maxConnections, "max-connections", api.DefaultMaxConnections, "most connections open at once; the request of one more is answered 503 UNAVAILABLE with Retry-After")
		fs.Float64Var(&f.idleTimeout, "idle-timeout", api.DefaultIdleTimeout.Seconds(), "`seconds` a keep-alive connection may sit idle between requests")
		fs.Float64Var(&f.bodyTimeout, "body-timeout", api.DefaultBodyTimeout.Seconds(), "`seconds` a request body may take to arrive (else 408)")
	}
	fs.StringVar(&f.runAs, "run-as", "", "run commands as this unprivileged `user` (name or uid; needs root)")
	fs.Func("allow-user", "with --run-as, also let a request run its command as this unprivileged `user` (an envd Basic user, a request's user); repeatable. Any other is refused", func(name string) error {
		f.allowUsers = append(f.allowUsers, name)
		return nil
	})
	fs.IntVar(&f.maxConcurrent, "max-concurrent", api.DefaultMaxConcurrent, "most commands running at once; more get RESOURCE_EXHAUSTED")
	fs.IntVar(&f.retainedJobs, "max-retained-jobs", supervisor.DefaultMaxRetainedJobs, "most exited background jobs kept readable; past it the oldest is forgotten")
	fs.StringVar(&f.retainedBytes, "max-retained-bytes", "64MiB", "most `size` (bytes, or with KiB, MiB or GiB) the exited jobs may take in memory (their output as allocated, their records, the runtime's overhead), all together with the running jobs' capture buffers; past it the oldest exited job is forgotten")
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir(m.Getenv), "`directory` for spill files (default $CORRAL_DATA_DIR, else the XDG data directory + /corral)")
	fs.StringVar(&f.containment, "containment", m.Getenv("CORRAL_CONTAINMENT"), "force a containment `tier`: cgroup2, cgroup1 or pgroup (default: the strongest that works; $CORRAL_CONTAINMENT)")
	fs.BoolVar(&f.reaper, "reaper", false, "run every command under a reaper of its own, which catches the daemons that leave their session and environment on every tier (a Go runtime start per command)")
	fs.Float64Var(&f.grace, "grace", supervisor.DefaultGrace.Seconds(), "`seconds` between SIGTERM and SIGKILL on the way down (0: SIGKILL at once)")
	f.limits.Register(fs)
	toolsFlag := "mcp-tools"
	if name == "corral mcp" {
		toolsFlag = "tools"
	}
	fs.StringVar(&f.tools, toolsFlag, api.ProfileCorral, "MCP tool `profile`: "+strings.Join(api.Profiles, ", ")+
		" (claude-code serves Claude Code's Bash, BashOutput and KillShell; codex serves Codex's exec_command and write_stdin; openhands serves OpenHands' execute_bash; docs/profiles.md)")
	fs.BoolVar(&f.sharedJobs, "shared-jobs", false, "let every client see, read and kill every background job (by default a job belongs to the MCP session, or else the token, that started it; another client gets NOT_FOUND)")
	fs.IntVar(&f.journalMax, "journal-max-entries", journal.DefaultMaxEntries, "most journal entries a session keeps (its newest)")
	fs.DurationVar(&f.journalIdle, "session-retention", journal.DefaultRetention, "a session idle this long is swept with its journal, spills and state (at start and hourly)")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format on stderr: json or console")
	fs.StringVar(&f.logLevel, "log-level", "info", "least log `level`: debug, info, warn or error")
	return fs
}

// isTerminal reports whether w is a character device (a terminal; also
// /dev/null, where colour does no harm): console logs are coloured only there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// logger builds the zerolog logger of the flags, writing to stderr.
func (m *Main) logger(f serverFlags) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(f.logLevel)
	if err != nil || f.logLevel == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level: unknown level %q", f.logLevel)
	}
	var w io.Writer = m.Stderr
	switch f.logFormat {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: m.Stderr, TimeFormat: time.RFC3339, NoColor: !isTerminal(m.Stderr)}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format: want json or console, got %q", f.logFormat)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// newServer opens the journal, builds the supervisor and the API server of
// the flags, and sweeps stale spill sessions (killtree sweeps stale
// containments itself). closeAll closes the supervisor, then the journal.
// token ("" for none) is required of every request; hint ends the note of a
// timed-out command; shared (corral mcp) runs without a journal when another
// process holds it. closeAll kills the background jobs.
func (m *Main) newServer(f serverFlags, token, hint string, shared bool, log zerolog.Logger) (*api.Server, *supervisor.Supervisor, func(), time.Duration, error) {
	grace, err := cli.Grace(f.grace)
	if err != nil {
		return nil, nil, nil, 0, errors.New(supervisor.Reason(err))
	}
	// The supervisor logs one line per finished command at info (session,
	// label, exit, duration, bytes, tier, kill counts), beside the server's
	// line per request.
	supLog := log
	if f.retainedJobs < 1 {
		return nil, nil, nil, 0, fmt.Errorf("--max-retained-jobs must be at least 1, got %d", f.retainedJobs)
	}
	if len(f.allowUsers) > 0 && f.runAs == "" {
		return nil, nil, nil, 0, errors.New("--allow-user bounds --run-as, and there is no --run-as: without it a request's user is refused only when this process cannot run commands as that user")
	}
	retainedBytes, err := parseSize(f.retainedBytes)
	if err != nil || retainedBytes < 1 {
		return nil, nil, nil, 0, fmt.Errorf("--max-retained-bytes: want a positive size such as 65536, 512KiB or 64MiB, got %q", f.retainedBytes)
	}
	lim := setMemoryLimit(retainedBytes)
	log.Info().Int64("bytes", lim.bytes).Str("source", lim.source).Int64("containerMemoryMax", lim.container).
		Msg("soft memory limit (docs/memory.md)")
	jnl, err := m.openJournal(f, shared, log)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	closeJournal := func() {
		if jnl != nil {
			jnl.Close()
		}
	}
	// This process runs commands and nothing else: an orphan born while
	// only one command lived is that command's (killtree.Config.OwnProcess).
	// The soft memory limit is what this process keeps for itself below
	// the memory limit it lives under (killtree.Envelope).
	containment := killtree.Config{Tier: killtree.Tier(f.containment), Reaper: f.reaper, OwnProcess: true, MemoryReserve: lim.bytes}
	if err := f.limits.Apply(&containment); err != nil {
		closeJournal()
		return nil, nil, nil, 0, err
	}
	sup, err := supervisor.New(supervisor.Config{
		Emulator:         newEmulator,
		ReturnIdleMemory: true,
		Journal:          jnl,
		DataDir:          f.dataDir,
		Grace:            grace,
		Scrub:            []string{tokenEnv},
		User:             f.runAs,
		AllowUsers:       f.allowUsers,
		Containment:      containment,
		Logger:           &supLog,
		TimeoutHint:      hint,
		MaxRetainedJobs:  f.retainedJobs,
		MaxRetainedBytes: retainedBytes,
	})
	if err != nil {
		closeJournal()
		return nil, nil, nil, 0, err
	}
	if st := sup.Sessions().Spills(); st != nil {
		removed, err := st.Sweep(0)
		if err != nil {
			log.Warn().Err(err).Msg("sweep stale spill sessions")
		}
		if len(removed) > 0 {
			log.Info().Strs("sessions", removed).Msg("removed stale spill sessions")
		}
	}
	srv, err := api.New(api.Config{Supervisor: sup, Token: token, MaxConcurrent: f.maxConcurrent,
		Logger: &log, Version: Version, BodyTimeout: seconds(f.bodyTimeout), SharedJobs: f.sharedJobs,
		NoJournal: noJournal(jnl, f.dataDir), MCPTools: f.tools})
	if err != nil {
		sup.Close()
		closeJournal()
		return nil, nil, nil, 0, err
	}
	return srv, sup, func() { sup.Close(); closeJournal() }, max(grace, 0), nil
}

func (m *Main) serve(ctx context.Context, args []string) error {
	f, err := m.serveFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	// Before anything else: the environment may hold the token, and from
	// here on no process of this user without CAP_SYS_PTRACE can read it.
	nonDumpable := markNonDumpable()
	log, err := m.logger(f)
	if err != nil {
		fmt.Fprintln(m.Stderr, "corral serve:", err)
		return errUsage
	}
	if nonDumpable != nil {
		log.Warn().Err(nonDumpable).Msg("could not make the server non-dumpable: a command running as this user can read its environment and memory")
	}
	tok, err := m.serverToken(f, log)
	if err != nil {
		return err
	}
	if err := checkExposure(f.listen, tok.value); err != nil {
		return err
	}
	srv, sup, closeAll, grace, err := m.newServer(f, tok.value, serveTimeoutHint, false, log)
	if err != nil {
		return err
	}
	defer closeAll()
	if tok.source == tokenFromGenerated {
		if err := writeToken(tok.path, tok.value); err != nil {
			return err
		}
		log.Info().Str("tokenFile", tok.path).Msg("generated a new token; clients send it as \"Authorization: Bearer <token>\"")
	}
	fc, err := m.startFaces(f, srv, sup, tok, log)
	if err != nil {
		return err
	}
	select {
	case err := <-fc.served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fc.shutdown(srv, grace, log)
	return nil
}

// serveFlags parses corral serve's arguments and refuses, as a usage
// mistake, what no server can start with; -h is flag.ErrHelp.
func (m *Main) serveFlags(args []string) (serverFlags, error) {
	var f serverFlags
	fs := m.serverFlagSet("corral serve", serveUsage, &f, true)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "corral serve: unexpected arguments %q\n", fs.Args())
		return f, errUsage
	}
	for _, check := range []func() error{f.checkConnLimits, f.checkSandboxdFlags} {
		if err := check(); err != nil {
			fmt.Fprintln(m.Stderr, "corral serve:", err)
			return f, errUsage
		}
	}
	return f, nil
}

// servedFaces are the HTTP API and the faces serving beside it (envd,
// sandboxd's gRPC and REST); each one's Serve result arrives on served.
type servedFaces struct {
	hs     *http.Server
	faces  []face
	served chan error
}

// startFaces listens on f.listen and serves the API there, then starts
// the faces the flags ask for. On an error nothing is left serving.
func (m *Main) startFaces(f serverFlags, srv *api.Server, sup *supervisor.Supervisor, tok serverToken, log zerolog.Logger) (*servedFaces, error) {
	ln, err := listen(f.listen)
	if err != nil {
		return nil, err
	}
	// No ReadTimeout or WriteTimeout: they would cut NDJSON streams, MCP
	// event streams and long polls. Bodies have the handler's own deadline.
	fc := &servedFaces{
		hs:     &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: api.HeaderTimeout, IdleTimeout: seconds(f.idleTimeout)},
		served: make(chan error, 4),
	}
	ln = api.LimitListener(ln, f.maxConnections)
	go func() { fc.served <- fc.hs.Serve(ln) }()
	ev := log.Info().Str("listen", listenAddr(ln)).Str("tier", string(sup.Bounds().Tier)).Bool("auth", tok.value != "").
		Str("tokenSource", tok.source).Str("version", Version)
	if tok.path != "" {
		ev = ev.Str("tokenFile", tok.path)
	}
	if b := sup.Bounds(); b.User != "" {
		ev = ev.Str("runAs", b.User).Str("cwd", b.UserDir)
	}
	ev.Msg("serving")
	if f.envd != "" {
		envdServer, err := m.serveEnvd(f, sup, srv.Observer(api.FaceEnvd), tok, log, fc.served)
		if err != nil {
			fc.close()
			return nil, err
		}
		fc.faces = append(fc.faces, face{shutdown: envdServer.Shutdown, close: func() { envdServer.Close() }})
	}
	more, err := m.serveSandboxd(f, sup, srv.Observer(api.FaceSandboxd), tok, log, fc.served)
	fc.faces = append(fc.faces, more...)
	if err != nil {
		fc.close()
		return nil, err
	}
	return fc, nil
}

// close closes every listener and connection at once (closeNow) and
// waits for each Serve to return.
func (fc *servedFaces) close() {
	fc.closeNow()
	for range 1 + len(fc.faces) {
		<-fc.served
	}
}

// closeNow closes every listener and connection at once.
func (fc *servedFaces) closeNow() {
	fc.hs.Close()
	for _, f := range fc.faces {
		f.close()
	}
}

// shutdown stops accepting, aborts the running commands (their trees go
// down through the grace period), then waits for the handlers to finish;
// connections still open grace+2 s later are closed.
func (fc *servedFaces) shutdown(srv *api.Server, grace time.Duration, log zerolog.Logger) {
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), grace+2*time.Second)
	defer cancel()
	servers := 1 + len(fc.faces)
	stopped := make(chan error, servers)
	go func() { stopped <- fc.hs.Shutdown(sctx) }()
	for _, f := range fc.faces {
		go func() { stopped <- f.shutdown(sctx) }()
	}
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("commands still running at the deadline")
	}
	for range servers {
		if err := <-stopped; err != nil {
			log.Warn().Err(err).Msg("connections still open at the deadline")
			fc.closeNow()
		}
	}
	for range servers {
		<-fc.served // http.ErrServerClosed
	}
}

// serveEnvd starts the envd face on f.envd; its Serve result goes to served.
// Only a token the operator gave is required of envd clients (X-Access-Token):
// the E2B SDKs in debug mode send none, so with a generated token the envd
// address must be loopback, as without one.
func (m *Main) serveEnvd(f serverFlags, sup *supervisor.Supervisor, observe func(supervisor.Result, error), tok serverToken, log zerolog.Logger, served chan<- error) (*http.Server, error) {
	token := tok.value
	if tok.source == tokenFromGenerated {
		token = ""
	}
	if err := checkExposure(f.envd, token); err != nil {
		return nil, fmt.Errorf("--envd: %w", err)
	}
	svc, err := envd.New(envd.Config{Supervisor: sup, Token: token, RootDir: f.rootDir, Observe: observe})
	if err != nil {
		return nil, err
	}
	ln, err := listen(f.envd)
	if err != nil {
		svc.Close()
		return nil, fmt.Errorf("--envd: %w", err)
	}
	// HTTP/1.1 for the SDKs, and HTTP/2 without TLS for gRPC clients.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: api.HeaderTimeout,
		IdleTimeout: seconds(f.idleTimeout), Protocols: &protocols}
	hs.RegisterOnShutdown(func() { svc.Close() }) // the filesystem root
	ln = api.LimitListener(ln, f.maxConnections)
	go func() { served <- hs.Serve(ln) }()
	log.Info().Str("envd", listenAddr(ln)).Bool("auth", token != "").Str("envdVersion", envd.Version).Msg("serving envd")
	if token == "" {
		log.Warn().Msg("--envd: no X-Access-Token is required (give the token with --token-file or $CORRAL_TOKEN to require it): every local process can run commands through it")
	}
	return hs, nil
}

// checkConnLimits refuses connection limits that would disable themselves.
func (f serverFlags) checkConnLimits() error {
	switch {
	case f.maxConnections < 1:
		return fmt.Errorf("--max-connections must be at least 1, got %d", f.maxConnections)
	case !(f.idleTimeout > 0):
		return fmt.Errorf("--idle-timeout must be more than 0 seconds, got %g", f.idleTimeout)
	case !(f.bodyTimeout > 0):
		return fmt.Errorf("--body-timeout must be more than 0 seconds, got %g", f.bodyTimeout)
	}
	return nil
}

// seconds converts flag seconds to a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// listenAddr is where ln listens, as --listen spells it (the port chosen
// for :0 included).
func listenAddr(ln net.Listener) string {
	if ln.Addr().Network() == "unix" {
		return "unix:" + ln.Addr().String()
	}
	return ln.Addr().String()
}

// checkExposure refuses to serve a non-loopback TCP address without a token
// (--insecure-no-auth).
func checkExposure(addr, token string) error {
	if strings.HasPrefix(addr, "unix:") {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", addr, err)
	}
	if token != "" || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without a token: anyone who can reach that address could run commands as this user; "+
		"drop --insecure-no-auth, or listen on 127.0.0.1 or a unix socket", addr)
}

// listen opens host:port, or unix:/path as a socket only its owner may use.
func listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		return net.Listen("tcp", addr)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("--listen %s: exists and is not a socket", addr)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("--listen %s: another server is listening there", addr)
		}
		// A socket left behind by a server that is gone.
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// Only the owner may connect. Until the chmod the socket has the
	// umask's mode, which under the usual 022 already denies others the
	// write permission a connect needs.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// openJournal opens the journal in the data directory. corral serve refuses
// to start on a journal it cannot open (another server holds it, or the
// file is damaged: the error says how to move it aside). corral mcp, of
// which an agent may start several on one data directory, runs without a
// journal when another process holds it, and says so in the log.
// noJournal says why a server runs without the journal openJournal gave
// (nil only when another process holds it), "" when it has one.
func noJournal(j *journal.Journal, dataDir string) string {
	if j != nil {
		return ""
	}
	return "another corral process (corral serve, or another corral mcp) holds the journal of the data directory " +
		dataDir + ", so this one records no results; give it a --data-dir of its own to keep them"
}

func (m *Main) openJournal(f serverFlags, shared bool, log zerolog.Logger) (*journal.Journal, error) {
	if f.journalMax < 1 {
		return nil, fmt.Errorf("--journal-max-entries must be at least 1, got %d", f.journalMax)
	}
	if f.journalIdle < time.Minute {
		return nil, fmt.Errorf("--session-retention must be at least 1m, got %v", f.journalIdle)
	}
	j, err := journal.Open(f.dataDir, journal.Options{MaxEntries: f.journalMax, Retention: f.journalIdle})
	if shared && errors.Is(err, journal.ErrLocked) {
		log.Warn().Err(err).Msg("running without a journal: Results are not recorded")
		return nil, nil
	}
	return j, err
}
