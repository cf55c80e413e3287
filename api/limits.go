package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Connection limits of `corral serve`: what a client without the token, or
// a slow one, can hold.
const (
	// DefaultMaxConnections is how many connections LimitListener keeps
	// open at once.
	DefaultMaxConnections = 1024
	// DefaultBodyTimeout is how long a request body may take to arrive.
	DefaultBodyTimeout = 30 * time.Second
	// HeaderTimeout is how long a connection may take to send a request's
	// headers (http.Server.ReadHeaderTimeout): a connection that sends
	// nothing is closed after it.
	HeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may sit idle
	// between requests (http.Server.IdleTimeout).
	DefaultIdleTimeout = 60 * time.Second
)

// refusal timing: how long LimitListener spends on a refused connection,
// and how many it refuses politely at once (the rest are closed without a
// word).
const (
	refuseLinger = 500 * time.Millisecond
	maxRefusing  = 64
)

// bodyDeadline gives every request body the server's body timeout to
// arrive, through a read deadline on the connection. No deadline is set
// for a request without a body, and none outlives the body: once the body
// reached its end, net/http clears the deadline as it starts reading the
// connection in the background (to notice a client that went away), where
// a deadline would cancel a streaming response or a long poll. Unlike
// http.Server.ReadTimeout it holds for whoever serves the Handler.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	if s.bodyTimeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, timeout: s.bodyTimeout}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody turns the deadline's expiry into ErrBodyTimeout.
type deadlineBody struct {
	io.ReadCloser
	timeout time.Duration
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = errorf(ErrBodyTimeout, "the request body did not arrive within %s", b.timeout)
	}
	return n, err
}

// LimitListener returns a listener that keeps at most max of ln's
// connections open at once (0 is DefaultMaxConnections). Past that it
// answers the first request of a new connection with 503 and the error
// JSON, code UNAVAILABLE, with Retry-After and "Connection: close", and
// closes the connection; a refused connection gets half a second in all
// to send its request's headers and read the answer, and when 64 refusals
// are already under way it is closed at once without an answer. The
// answers net/http's server writes itself for a request it cannot read
// (431 for headers too large, 400, 501) go out as the error JSON too. A
// connection's slot is freed when it is closed. Close closes ln and waits
// for the refusals under way.
func LimitListener(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		max = DefaultMaxConnections
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, max),
		refusing: make(chan struct{}, maxRefusing), refusal: refusal(max)}
}

type limitListener struct {
	net.Listener
	slots    chan struct{} // one per open connection
	refusing chan struct{} // one per refusal under way
	refusal  []byte        // the whole 503 response
	wg       sync.WaitGroup
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, free: func() { <-l.slots }}, nil
		default:
		}
		select {
		case l.refusing <- struct{}{}:
			l.wg.Go(func() {
				defer func() { <-l.refusing }()
				refuse(c, l.refusal)
			})
		default:
			c.Close()
		}
	}
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// limitConn frees its listener slot once, on the first Close.
type limitConn struct {
	net.Conn
	once sync.Once
	free func()
}

// Write passes p on, except the server's own plain-text error response,
// which goes out as the error JSON (serverError).
func (c *limitConn) Write(p []byte) (int, error) {
	if status, text, ok := serverError(p); ok {
		if _, err := c.Conn.Write(jsonConnError(status, text)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// refuse answers the request on c with the 503 and closes c. It waits
// for the request's headers first: an answer before the request is an
// "unsolicited response" that HTTP clients (Go's among them) fail on. A
// connection that sends no headers within refuseLinger is closed without
// an answer. After the answer it closes its sending side and reads what
// the client still sends until it closes or the linger ends: closing a
// socket with unread bytes sends a reset, which can destroy the answer
// before the client reads it.
func refuse(c net.Conn, resp []byte) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(refuseLinger))
	if !readHeaders(c) {
		return
	}
	if _, err := c.Write(resp); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// readHeaders reads from c until the blank line that ends a request's
// headers, and reports whether it came within 64 KiB.
func readHeaders(c net.Conn) bool {
	var buf [4096]byte
	var tail []byte // the last bytes read, to find the end across reads
	for n := 0; n < 64<<10; {
		k, err := c.Read(buf[:])
		n += k
		tail = append(tail, buf[:k]...)
		if bytes.Contains(tail, []byte("\r\n\r\n")) {
			return true
		}
		tail = tail[max(0, len(tail)-3):]
		if err != nil {
			return false
		}
	}
	return false
}

// refusal builds the 503 response of a full listener.
func refusal(max int) []byte {
	body, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: CodeUnavailable,
		Message: fmt.Sprintf("the server has %d connections open, the most it allows; retry later", max)}})
	body = append(body, '\n')
	head := "HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: application/json\r\n" +
		"Retry-After: " + retryAfter + "\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	return append([]byte(head), body...)
}
