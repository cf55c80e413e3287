package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// net/http's server answers a request it cannot read (headers past
// MaxHeaderBytes: 431; a malformed request line or header: 400; an
// unsupported transfer encoding: 501) itself, before any handler runs, with
// one write of a whole plain-text response straight to the connection
// (net/http server.go, conn.serve: "HTTP/1.1 " + status + errorHeaders +
// text). serverError recognises exactly that write, which no response of a
// handler can be (those carry a Date header and go through the connection's
// buffered writer), and jsonConnError rewrites it as the error JSON, so that
// these answers are the one envelope too.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// serverError parses the server's own plain-text error response: its
// status and text; ok is false for anything else.
func serverError(p []byte) (status int, text string, ok bool) {
	head, body, found := bytes.Cut(p, []byte(plainErrorHeaders))
	if !found || !bytes.HasPrefix(head, []byte("HTTP/1.1 ")) || bytes.ContainsAny(head, "\r\n") {
		return 0, "", false
	}
	code, reason, _ := strings.Cut(string(head[len("HTTP/1.1 "):]), " ")
	status, err := strconv.Atoi(code)
	if err != nil || status < 400 || status > 599 {
		return 0, "", false
	}
	// The text repeats the status line ("431 Request Header Fields Too
	// Large") or adds to it ("400 Bad Request: missing required Host
	// header"); what it adds is the message.
	text = strings.TrimPrefix(string(body), code+" ")
	if _, detail, more := strings.Cut(text, ": "); more {
		text = detail
	} else if text == reason || text == "" {
		text = strings.ToLower(reason)
	}
	return status, text, true
}

// jsonConnError is the error JSON response for the server's own error.
func jsonConnError(status int, text string) []byte {
	if status == http.StatusRequestHeaderFieldsTooLarge {
		text = fmt.Sprintf("the request's header fields are over the server's limit of %d bytes", http.DefaultMaxHeaderBytes)
	}
	body, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: statusCode(status), Message: text}})
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}
