package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxLine bounds one line of LineTransport (the go-sdk's own bound).
const DefaultMaxLine = mcp.DefaultMaxLineLength

// JSON-RPC error codes of the replies LineTransport makes itself.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// LineTransport is the transport of corral mcp: newline-delimited JSON-RPC
// over In and Out, as the go-sdk's StdioTransport, except that one bad line
// does not end the connection. A line that is not JSON, or is longer than
// MaxLine, gets a JSON-RPC parse error (-32700, id null) on Out and is
// skipped; valid JSON that is not a JSON-RPC message (or a batch the
// negotiated protocol does not allow) gets -32600 with its id when it has
// one. An oversized line is discarded as it arrives, never buffered whole.
// Blank lines are ignored. The connection ends when In reaches EOF.
type LineTransport struct {
	In  io.Reader
	Out io.Writer
	// MaxLine bounds one line in bytes; 0 is DefaultMaxLine.
	MaxLine int
}

// Connect implements mcp.Transport. The line filter runs in a goroutine of
// its own until In reaches EOF or the connection is closed; a read of In
// that blocks keeps it (as it keeps the go-sdk's own reader).
func (t *LineTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	max := t.MaxLine
	if max <= 0 {
		max = DefaultMaxLine
	}
	pr, pw := io.Pipe()
	out := &lockedWriter{w: t.Out}
	f := &lineFilter{in: bufio.NewReaderSize(t.In, 64<<10), pass: pw, reply: out, max: max}
	go func() {
		// CloseWithError(nil) is a clean EOF for the go-sdk's reader.
		pw.CloseWithError(f.run())
	}()
	inner := &mcp.IOTransport{Reader: pr, Writer: nopWriteCloser{out}, MaxLineLength: max + 1}
	return inner.Connect(ctx)
}

// lineFilter passes the lines of in that the go-sdk can take to pass, and
// answers the others on reply itself.
type lineFilter struct {
	in      *bufio.Reader
	pass    io.Writer
	reply   io.Writer
	max     int
	version string // the protocol version the client's initialize asked for
}

// run filters until in ends (nil at EOF) or pass is closed.
func (f *lineFilter) run() error {
	for {
		line, tooLong, err := f.readLine()
		if len(line) > 0 || tooLong {
			if werr := f.handle(line, tooLong); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line without its newline. Past max bytes it stops
// keeping them and reads on to the newline, reporting tooLong.
func (f *lineFilter) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := f.in.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > f.max+1 { // +1: the newline
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// handle passes one line on, or answers it.
func (f *lineFilter) handle(line []byte, tooLong bool) error {
	switch {
	case tooLong:
		return f.answer(nil, codeParseError, fmt.Sprintf("a line longer than %d bytes was skipped", f.max))
	case len(bytes.TrimSpace(line)) == 0:
		return nil
	case !json.Valid(line):
		return f.answer(nil, codeParseError, "parse error: the line is not valid JSON; it was skipped")
	}
	if id, reason := f.check(line); reason != "" {
		return f.answer(id, codeInvalidRequest, reason)
	}
	_, err := f.pass.Write(append(line, '\n'))
	return err
}

// check returns why the go-sdk could not take line, with the message's id
// when it has one; "" when it can.
func (f *lineFilter) check(line []byte) (id any, reason string) {
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] != '[' {
		msg, err := jsonrpc.DecodeMessage(trimmed)
		if err != nil {
			return rawID(trimmed), fmt.Sprintf("invalid request: %v", err)
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(req.Params, &p)
			f.version = p.ProtocolVersion
		}
		return nil, ""
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(trimmed, &batch); err != nil || len(batch) == 0 {
		return nil, "invalid request: an empty or malformed batch"
	}
	// The go-sdk ends the connection on a batch under 2025-06-18 and later.
	if f.version >= "2025-06-18" {
		return nil, fmt.Sprintf("invalid request: JSON-RPC batches are not supported in protocol %s", f.version)
	}
	seen := map[string]bool{}
	for _, m := range batch {
		msg, err := jsonrpc.DecodeMessage(m)
		if err != nil {
			return nil, fmt.Sprintf("invalid request in batch: %v", err)
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			k := fmt.Sprint(req.ID.Raw())
			if seen[k] {
				return nil, fmt.Sprintf("invalid request: batch repeats id %s", k)
			}
			seen[k] = true
		}
	}
	return nil, ""
}

// rawID is the "id" member of a JSON object when it is a string or a
// number, else nil.
func rawID(line []byte) any {
	var m struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	switch m.ID.(type) {
	case string, float64:
		return m.ID
	}
	return nil
}

// answer writes a JSON-RPC error response.
func (f *lineFilter) answer(id any, code int, msg string) error {
	b, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	if err != nil {
		return err
	}
	_, err = f.reply.Write(append(b, '\n'))
	return err
}

// lockedWriter makes each Write whole: the go-sdk's replies and the
// filter's share Out.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
