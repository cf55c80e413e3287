package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
)

// TestLineTransportBadLines: over the line transport (corral mcp), a line
// of garbage, a line of 20 MiB, JSON that is not JSON-RPC and a batch the
// protocol forbids each get a JSON-RPC error reply, and the server keeps
// serving: the calls after them run.
func TestLineTransportBadLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- e.srv.ServeMCP(context.Background(), &api.LineTransport{In: inR, Out: outW, MaxLine: 1 << 20})
		outW.Close()
	}()
	replies := make(chan string, 16)
	go func() {
		defer close(replies)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			replies <- sc.Text()
		}
		io.Copy(io.Discard, outR)
	}()
	defer func() {
		inW.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("ServeMCP: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeMCP did not return after stdin closed")
		}
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	type reply struct {
		ID    any `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	next := func() reply {
		t.Helper()
		select {
		case l, ok := <-replies:
			if !ok {
				t.Fatal("the server closed its output")
			}
			var r reply
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("reply %q: %v", l, err)
			}
			return r
		case <-time.After(20 * time.Second):
			t.Fatal("no reply within 20 s")
		}
		return reply{}
	}
	wantError := func(what string, code int, id any) {
		t.Helper()
		r := next()
		if r.Error == nil || r.Error.Code != code || r.ID != id {
			t.Errorf("%s: reply %+v (error %+v), want code %d id %v", what, r, r.Error, code, id)
		}
	}
	call := func(id int, command string) {
		t.Helper()
		send(`{"jsonrpc":"2.0","id":` + jsonString(string(rune('0'+id))) + `,"method":"tools/call","params":{"name":"bash","arguments":{"command":` + jsonString(command) + `}}}`)
		r := next()
		if r.Error != nil || !strings.Contains(string(r.Result), `ok\n[exit code 0`) {
			t.Errorf("call %d: %+v %s", id, r.Error, r.Result)
		}
	}

	send(`{"jsonrpc": "2.0", "id": 1, "method": garbage`)
	wantError("malformed JSON", -32700, nil)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := next(); r.Error != nil || r.ID != float64(1) {
		t.Fatalf("initialize: %+v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call(2, "echo ok")

	// 20 MiB on one line, sent in pieces while the server reads.
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"bash","arguments":{"command":"` + strings.Repeat("x", 20<<20) + `"}}}`
	send(big)
	wantError("a 20 MiB line", -32700, nil)
	call(3, "echo ok")

	send(``)                                      // ignored
	send(`{"jsonrpc":"2.0","id":"q","result":7}`) // a response to nothing: the SDK ignores it
	send(`{"id":"x","foo":1}`)
	wantError("JSON that is not JSON-RPC", -32600, "x")
	send(`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
	wantError("a batch on 2025-06-18", -32600, nil)
	send(`42`)
	wantError("a number", -32600, nil)
	call(4, "echo ok")
}
