package envd_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/corral-sh/corral/api/envd/processpb"
	"github.com/corral-sh/corral/internal/proctest"
)

// TestListWaiting: List carries corral's waiting (ProcessInfo field 1000)
// while a process waits for input, on a terminal and on a stdin pipe, over
// both codecs, under the JSON name "waiting"; a process that does not wait
// has none. A client built from envd's own schema (without the field) reads
// the same binary and JSON answers, skipping it. StreamInput with pty bytes
// answers the terminal's prompt.
func TestListWaiting(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waiting is detected on Linux")
	}
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, marker := proctest.Marker(t)
	term := bash(marker, `read -p "name? " x; echo "hi $x"`)
	term.Pty = &processpb.PTY{Size: &processpb.PTY_Size{Cols: 80, Rows: 24}}
	ts := started(t)(e.json.Start(ctx, connect.NewRequest(term)))
	defer ts.Close()
	tpid := awaitStart(t, ts)
	pipe := bash(marker, `printf 'age? '; read -r y; echo "age $y"`)
	pipe.Stdin = nil // a stdin pipe
	ps := started(t)(e.client.Start(ctx, connect.NewRequest(pipe)))
	defer ps.Close()
	ppid := awaitStart(t, ps)
	ss := started(t)(e.client.Start(ctx, connect.NewRequest(bash(marker, `sleep 300`))))
	defer ss.Close()
	spid := awaitStart(t, ss)

	waits := func(c interface {
		List(context.Context, *connect.Request[processpb.ListRequest]) (*connect.Response[processpb.ListResponse], error)
	}) map[uint32]*processpb.Waiting {
		resp, err := c.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		m := map[uint32]*processpb.Waiting{}
		for _, p := range resp.Msg.GetProcesses() {
			m[p.GetPid()] = p.GetWaiting()
		}
		return m
	}
	deadline := time.Now().Add(30 * time.Second) // a bound on a loaded machine, not a speed
	var got map[uint32]*processpb.Waiting
	for time.Now().Before(deadline) {
		if got = waits(e.client); got[tpid] != nil && got[ppid] != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []struct {
		name string
		m    map[uint32]*processpb.Waiting
	}{{"binary", got}, {"json", waits(e.json)}} {
		tw, pw := c.m[tpid], c.m[ppid]
		if tw.GetPrompt() != "name?" || tw.GetKind() != "line" || tw.GetPid() == 0 || len(tw.GetArgv()) == 0 {
			t.Errorf("%s: the terminal's waiting %v", c.name, tw)
		}
		if _, err := time.Parse(time.RFC3339Nano, tw.GetSince()); err != nil {
			t.Errorf("%s: since %q: %v", c.name, tw.GetSince(), err)
		}
		if pw.GetPrompt() != "age?" || pw.GetKind() != "line" {
			t.Errorf("%s: the pipe's waiting %v", c.name, pw)
		}
		if w, ok := c.m[spid]; !ok || w != nil {
			t.Errorf("%s: sleep 300 listed %v with waiting %v", c.name, ok, w)
		}
	}

	// The wire: JSON names it "waiting"; envd's schema skips it.
	raw := func(ctype, body string) []byte {
		req, _ := http.NewRequest("POST", e.ts.URL+"/process.Process/List", strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("List %s: %d %s", ctype, resp.StatusCode, b)
		}
		return b
	}
	jsonBody := raw("application/json", "{}")
	var wire struct {
		Processes []map[string]json.RawMessage `json:"processes"`
	}
	if err := json.Unmarshal(jsonBody, &wire); err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, p := range wire.Processes {
		if _, ok := p["waiting"]; ok {
			named++
		}
	}
	if named != 2 {
		t.Errorf("JSON List: %d processes with a \"waiting\" key, want 2: %s", named, jsonBody)
	}
	envdList := envdSchema(t)
	for _, c := range []struct {
		name string
		read func(proto.Message) error
	}{
		{"binary", func(m proto.Message) error {
			return proto.UnmarshalOptions{DiscardUnknown: false}.Unmarshal(raw("application/proto", ""), m)
		}},
		{"json", func(m proto.Message) error {
			// As connect-es reads JSON by default: unknown fields ignored.
			return protojsonIgnoreUnknown(jsonBody, m)
		}},
	} {
		m := dynamicpb.NewMessage(envdList)
		if err := c.read(m); err != nil {
			t.Errorf("envd's schema reading the %s List: %v", c.name, err)
			continue
		}
		procs := m.Get(envdList.Fields().ByName("processes")).List()
		pids := map[uint64]bool{}
		for i := range procs.Len() {
			p := procs.Get(i).Message()
			pids[p.Get(p.Descriptor().Fields().ByName("pid")).Uint()] = true
		}
		if !pids[uint64(tpid)] || !pids[uint64(ppid)] || !pids[uint64(spid)] {
			t.Errorf("envd's schema reading the %s List: pids %v", c.name, pids)
		}
	}

	// StreamInput with pty bytes answers the terminal; the wait ends.
	in := e.json.StreamInput(ctx)
	for _, m := range []*processpb.StreamInputRequest{
		{Event: &processpb.StreamInputRequest_Start{Start: &processpb.StreamInputRequest_StartEvent{Process: pidSel(tpid)}}},
		{Event: &processpb.StreamInputRequest_Data{Data: &processpb.StreamInputRequest_DataEvent{
			Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Pty{Pty: []byte("ann\r")}}}}},
	} {
		if err := in.Send(m); err != nil {
			t.Fatalf("StreamInput send: %v", err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatalf("StreamInput: %v", err)
	}
	var pty strings.Builder
	for !strings.Contains(pty.String(), "hi ann") {
		if !ts.Receive() {
			t.Fatalf("the terminal's stream ended before hi ann (pty %q): %v", pty.String(), ts.Err())
		}
		pty.Write(ts.Msg().GetEvent().GetData().GetPty())
	}
	if w, ok := waits(e.client)[tpid]; ok && w != nil {
		t.Errorf("after its answer the terminal still waits: %v", w)
	}
	e.client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: pidSel(ppid), Signal: processpb.Signal_SIGNAL_SIGKILL}))
	e.client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: pidSel(spid), Signal: processpb.Signal_SIGNAL_SIGKILL}))
	proctest.NoSurvivors(t, marker, 3*time.Second)
}

// protojsonIgnoreUnknown reads JSON into m, ignoring unknown fields.
func protojsonIgnoreUnknown(b []byte, m proto.Message) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, m)
}

// envdSchema is ListResponse as envd's own process.proto has it: corral's
// process.proto without ProcessInfo.waiting and its message.
func envdSchema(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	fdp := protodesc.ToFileDescriptorProto(processpb.File_process_process_proto)
	var msgs []*descriptorpb.DescriptorProto
	for _, m := range fdp.MessageType {
		if m.GetName() == "Waiting" {
			continue
		}
		if m.GetName() == "ProcessInfo" {
			var fields []*descriptorpb.FieldDescriptorProto
			for _, f := range m.Field {
				if f.GetNumber() != 1000 {
					fields = append(fields, f)
				}
			}
			m.Field = fields
			// proto3 optional's synthetic oneof, the last one
			if n := len(m.OneofDecl); n == 0 || m.OneofDecl[n-1].GetName() != "_waiting" {
				t.Fatalf("ProcessInfo's oneofs %v: want _waiting last", m.OneofDecl)
			}
			m.OneofDecl = m.OneofDecl[:len(m.OneofDecl)-1]
		}
		msgs = append(msgs, m)
	}
	fdp.MessageType = msgs
	fdp.Name = proto.String("envd/process.proto") // not corral's, which the registry holds
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("ListResponse")
}
