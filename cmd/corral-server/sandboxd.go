package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/api/sandboxd"
	"github.com/corral-sh/corral/supervisor"
)

// face is one more listener serve runs beside the API (envd, sandboxd):
// shutdown stops it gracefully within ctx, close stops it at once.
type face struct {
	shutdown func(ctx context.Context) error
	close    func()
}

// checkSandboxdFlags refuses what no sandboxd face can be served with:
// --sandboxd or --sandboxd-rest without --root-dir, --root-dir without a
// face it is the root of, a root that is not an existing directory, an
// address without a port. serve reports it as a usage mistake before
// anything starts.
func (f serverFlags) checkSandboxdFlags() error {
	if f.sandboxd == "" && f.sandboxdREST == "" {
		if f.rootDir != "" && f.envd == "" {
			return errors.New("--root-dir is the root of --sandboxd, --sandboxd-rest and --envd; give one of them, or drop it")
		}
		return nil
	}
	if f.rootDir == "" {
		return errors.New("--sandboxd and --sandboxd-rest need --root-dir, the sandbox root (sandboxd's is /workspace)")
	}
	for _, a := range []struct{ flag, addr string }{{"--sandboxd", f.sandboxd}, {"--sandboxd-rest", f.sandboxdREST}} {
		if a.addr == "" || strings.HasPrefix(a.addr, "unix:") {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return fmt.Errorf("%s %q: want host:port or unix:PATH (%v)", a.flag, a.addr, err)
		}
	}
	if fi, err := os.Stat(f.rootDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--root-dir %q: not an existing directory", f.rootDir)
	}
	return nil
}

// serveSandboxd starts the sandboxd faces the flags ask for (gRPC on
// f.sandboxd, REST on f.sandboxdREST); their Serve results go to served,
// one each. Only a token the operator gave is required (gRPC metadata
// "authorization: Bearer", and on the REST API); with a generated token or
// none, the addresses must be loopback or unix sockets.
func (m *Main) serveSandboxd(f serverFlags, sup *supervisor.Supervisor, observe func(supervisor.Result, error), tok serverToken, log zerolog.Logger, served chan<- error) (faces []face, retErr error) {
	if f.sandboxd == "" && f.sandboxdREST == "" {
		return nil, nil
	}
	if err := f.checkSandboxdFlags(); err != nil {
		return nil, err
	}
	token := tok.value
	if tok.source == tokenFromGenerated {
		token = ""
	}
	for _, a := range []struct{ flag, addr string }{{"--sandboxd", f.sandboxd}, {"--sandboxd-rest", f.sandboxdREST}} {
		if a.addr == "" {
			continue
		}
		if err := checkExposure(a.addr, token); err != nil {
			return nil, fmt.Errorf("%s: %w", a.flag, err)
		}
	}
	var tokens []string
	if token != "" {
		tokens = []string{token}
	}
	svc, err := sandboxd.New(sandboxd.Config{Supervisor: sup, RootDir: f.rootDir, Tokens: tokens, Observe: observe})
	if err != nil {
		return nil, err
	}
	// The root directory is released once every face stopped.
	var open atomic.Int32
	open.Store(1)
	if f.sandboxd != "" && f.sandboxdREST != "" {
		open.Store(2)
	}
	release := func() {
		if open.Add(-1) == 0 {
			svc.Close()
		}
	}
	defer func() {
		if retErr != nil {
			for _, fc := range faces {
				fc.close()
			}
			svc.Close() // a second Close only returns an error
		}
	}()
	if f.sandboxd != "" {
		ln, err := listen(f.sandboxd)
		if err != nil {
			return faces, fmt.Errorf("--sandboxd: %w", err)
		}
		g := svc.GRPCServer()
		go func() {
			err := g.Serve(api.LimitListener(ln, f.maxConnections))
			if err == nil || errors.Is(err, grpc.ErrServerStopped) {
				err = http.ErrServerClosed // what serve waits for from a stopped server
			}
			served <- err
		}()
		faces = append(faces, face{shutdown: func(ctx context.Context) error {
			svc.SetReady(false)
			defer release()
			return grpcStop(ctx, g)
		}, close: func() { g.Stop(); release() }})
		log.Info().Str("sandboxd", listenAddr(ln)).Str("rootDir", f.rootDir).Bool("auth", token != "").Msg("serving sandboxd (gRPC)")
	}
	if f.sandboxdREST != "" {
		ln, err := listen(f.sandboxdREST)
		if err != nil {
			return faces, fmt.Errorf("--sandboxd-rest: %w", err)
		}
		hs := &http.Server{Handler: svc.RESTHandler(), ReadHeaderTimeout: api.HeaderTimeout, IdleTimeout: seconds(f.idleTimeout)}
		go func() { served <- hs.Serve(api.LimitListener(ln, f.maxConnections)) }()
		faces = append(faces, face{shutdown: func(ctx context.Context) error {
			svc.SetReady(false)
			defer release()
			return hs.Shutdown(ctx)
		}, close: func() { hs.Close(); release() }})
		log.Info().Str("sandboxdRest", listenAddr(ln)).Str("rootDir", f.rootDir).Bool("auth", token != "").Msg("serving sandboxd (REST files)")
	}
	if token == "" {
		log.Warn().Msg("--sandboxd: no bearer token is required (give the token with --token-file or $CORRAL_TOKEN to require it): every local process can run commands through it")
	}
	return faces, nil
}

// grpcStop stops g gracefully, or at once when ctx ends first.
func grpcStop(ctx context.Context, g *grpc.Server) error {
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		g.Stop()
		<-done
		return ctx.Err()
	}
}
