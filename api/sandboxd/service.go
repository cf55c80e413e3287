package sandboxd

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corral-sh/corral/api/sandboxd/processpb"
	"github.com/corral-sh/corral/internal/confine"
	"github.com/corral-sh/corral/supervisor"
)

const (
	// label names the spill files and journal entries of sandboxd commands.
	label = "sandboxd"
	// maxMessageBytes bounds one request message (WriteStdin's bytes).
	maxMessageBytes = 16 << 20
	// DefaultMetadataPrefix is sandboxd's: only environment variables with
	// it are served on /v1/metadata.
	DefaultMetadataPrefix = "SANDBOX_"
)

// Config configures a Service.
type Config struct {
	// Supervisor runs the processes. Required.
	Supervisor *supervisor.Supervisor
	// RootDir is the sandbox root: the files API is confined beneath it and
	// processes start in it (a request's cwd must lie beneath it).
	// Required; it must be an existing directory.
	RootDir string
	// Tokens, when any, are required as "authorization: Bearer TOKEN" in
	// gRPC metadata and on the REST files API; each token is a client of
	// its own, which sees only its own processes. None: no check (the
	// caller listens on loopback or a unix socket only).
	Tokens []string
	// MetadataPrefix selects the environment variables /v1/metadata serves
	// (names that look like credentials are withheld); "" is
	// DefaultMetadataPrefix.
	MetadataPrefix string
	// Environ is the environment /v1/metadata reads; nil is os.Environ.
	Environ func() []string
	// Observe, when set, is called once for each process this face
	// started or refused: with its Result once it ended (from a goroutine
	// that lives as long as the process; the supervisor's Close ends every
	// process), or with the error that refused it. corral serve counts
	// corral_commands_total{face="sandboxd"} with it (api.Server.Observer). It
	// must be safe for concurrent use.
	Observe func(supervisor.Result, error)
}

// Service is the sandboxd face of one Supervisor. It is safe for concurrent
// use.
type Service struct {
	sup     *supervisor.Supervisor
	rootDir string
	root    *confine.Root
	tokens  [][sha256.Size]byte
	procs   table
	started time.Time
	ready   atomic.Bool
	meta    map[string]string
	// observe is Config.Observe; nil: none.
	observe supervisor.Observer
}

// New returns a Service over cfg.Supervisor. Close releases the root
// directory it holds open.
func New(cfg Config) (*Service, error) {
	if cfg.Supervisor == nil {
		return nil, errors.New("sandboxd: no supervisor")
	}
	if cfg.RootDir == "" {
		return nil, errors.New("sandboxd: no root directory")
	}
	owner := cfg.Supervisor.Bounds().User
	root, err := confine.Open(cfg.RootDir, owner)
	if err != nil {
		return nil, fmt.Errorf("sandboxd: root directory: %w", err)
	}
	s := &Service{sup: cfg.Supervisor, rootDir: root.Dir(), root: root, started: time.Now(), observe: cfg.Observe}
	for _, t := range cfg.Tokens {
		if t == "" {
			root.Close()
			return nil, errors.New("sandboxd: an empty token")
		}
		s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
	}
	prefix := cfg.MetadataPrefix
	if prefix == "" {
		prefix = DefaultMetadataPrefix
	}
	environ := cfg.Environ
	if environ == nil {
		environ = os.Environ
	}
	s.meta = metadataEnv(environ(), prefix)
	s.procs.init()
	s.ready.Store(true)
	return s, nil
}

// Close releases the root directory. It kills nothing: the processes are
// the supervisor's jobs, which its Close ends.
func (s *Service) Close() error { return s.root.Close() }

// SetReady sets what /v1/health answers: 200 when ready, 503 once a
// shutdown began (so an orchestrator stops routing to it).
func (s *Service) SetReady(ready bool) { s.ready.Store(ready) }

// GRPCServer returns a gRPC server with the process service and the auth
// check registered; the caller serves it and stops it.
func (s *Service) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.ForceServerCodecV2(newCodec()),
		grpc.ChainUnaryInterceptor(s.unaryAuth),
		grpc.ChainStreamInterceptor(s.streamAuth),
	}, opts...)
	g := grpc.NewServer(opts...)
	processpb.RegisterProcessServiceServer(g, &rpc{s: s})
	return g
}

// clientKey is the context key of the caller's client index.
type clientKey struct{}

// client is the caller: the index of its token in Config.Tokens, 0 when
// no token is configured.
func client(ctx context.Context) int {
	c, _ := ctx.Value(clientKey{}).(int)
	return c
}

// authenticate finds the bearer token of ctx's metadata among the
// service's and returns ctx carrying its client.
func (s *Service) authenticate(ctx context.Context) (context.Context, error) {
	if len(s.tokens) == 0 {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if c, ok := s.match(v); ok {
			return context.WithValue(ctx, clientKey{}, c), nil
		}
	}
	return nil, status.Error(codes.Unauthenticated, `a valid "authorization: Bearer TOKEN" is required in the request metadata`)
}

// match returns the client of an Authorization value, comparing in
// constant time with every token.
func (s *Service) match(v string) (int, bool) {
	scheme, tok, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return 0, false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found, ok := 0, false
	for i, want := range s.tokens {
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			found, ok = i, true
		}
	}
	return found, ok
}

func (s *Service) unaryAuth(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Service) streamAuth(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
		return err
	}
	return h(srv, &authedStream{ServerStream: ss, ctx: ctx})
}

// authedStream is a ServerStream whose context carries the client.
type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a *authedStream) Context() context.Context { return a.ctx }

// toStatus turns a supervisor error into a gRPC status with a code clients
// branch on and a message without Go package prefixes.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(grpcCodes[supervisor.Classify(err)], supervisor.Reason(err))
}

// grpcCodes are the gRPC codes of the supervisor's error classes.
var grpcCodes = map[supervisor.Class]codes.Code{
	supervisor.ClassInternal:     codes.Internal,
	supervisor.ClassInvalid:      codes.InvalidArgument,
	supervisor.ClassNotFound:     codes.NotFound,
	supervisor.ClassExhausted:    codes.ResourceExhausted,
	supervisor.ClassStillRunning: codes.DeadlineExceeded,
	supervisor.ClassUnavailable:  codes.Unavailable,
	supervisor.ClassCanceled:     codes.Canceled,
	supervisor.ClassDeadline:     codes.DeadlineExceeded,
}
