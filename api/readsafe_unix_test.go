//go:build unix

package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
)

// mkfifo makes a FIFO at path.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// plantFIFO makes a FIFO named like a spill file in session s and returns
// its path.
func plantFIFO(t *testing.T, e *env, s string) string {
	t.Helper()
	dir := filepath.Join(e.data, "scratch", s, "tool-output")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "out.stdout-1-1.log")
	mkfifo(t, fifo)
	return fifo
}

// TestReadGrepFIFO: a FIFO planted in a session directory is refused at
// once by read and grep, also 200 at a time, and leaves no thread or
// descriptor behind (each used to hold a thread and a connection for ever).
func TestReadGrepFIFO(t *testing.T) {
	e := newEnv(t)
	fifo := plantFIFO(t, e, "f")
	for _, ep := range []string{"/v1/read", "/v1/grep"} {
		code, b := e.do(context.Background(), "POST", ep, readBody(ep, fifo))
		if code != 404 || errorCode(t, b) != api.CodeNotFound || !strings.Contains(string(b), "is a FIFO, not a regular file") {
			t.Errorf("%s of a FIFO: %d %s", ep, code, b)
		}
	}
	e.client.Transport.(*http.Transport).CloseIdleConnections()
	fds, threads := proctest.FDCount(t), proctest.Threads()

	const n = 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			ep := []string{"/v1/read", "/v1/grep"}[i%2]
			code, b := e.do(ctx, "POST", ep, readBody(ep, fifo))
			if code != 404 {
				errs <- fmt.Sprintf("%s: %d %s", ep, code, b)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	d := time.Since(start)
	if d > 20*time.Second {
		t.Errorf("%d reads of a FIFO took %v", n, d)
	}
	// Descriptors return to where they were (the server runs in this
	// process); threads stay near it: the Go runtime keeps the few extra
	// threads a burst made, while a blocking open would hold one per request.
	e.client.Transport.(*http.Transport).CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for {
		nf, nt := proctest.FDCount(t), proctest.Threads()
		if nf <= fds && nt <= threads+20 {
			t.Logf("%d concurrent reads of a FIFO: %v; fds %d -> %d, threads %d -> %d", n, d, fds, nf, threads, nt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d FIFO reads: %d fds (was %d), %d threads (was %d)", n, nf, fds, nt, threads)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
