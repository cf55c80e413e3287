package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// The golden files under api/testdata/golden are the wire contract by
// example (docs/wire.md): each is a value a live server wrote (or, for
// INTERNAL, the error JSON an unknown failure becomes), with the fields
// that differ from run to run set to fixed values (goldenFixed). TestGolden
// compares what the code writes today with each file (-update rewrites
// them) and validates each file against its schema in api/openapi.json,
// so the examples, the code and the schemas cannot drift apart.

// goldenDir holds the golden files.
const goldenDir = "testdata/golden"

// goldenFixed are the fields whose values depend on the run (time, pids,
// the machine's containment tier and accounting), each with the value the
// golden files show. A field not named here is compared as written.
var goldenFixed = map[string]any{
	"durationMs":      12,
	"pid":             4242,
	"startedAt":       "2026-01-01T00:00:00Z",
	"at":              "2026-01-01T00:00:01Z",
	"since":           "2026-01-01T00:00:00.5Z",
	"tier":            "cgroup2",
	"cpuUserMs":       3,
	"cpuSystemMs":     5,
	"peakMemoryBytes": 2097152,
}

// goldenDropped are fields left out of the golden files: limitsNotEnforced
// lists what this machine's tier does not enforce, which differs between
// machines (the schema and docs/wire.md describe it).
var goldenDropped = []string{"limitsNotEnforced"}

// goldenIDs matches the IDs corral makes: a job's (j-<hex>), and a journal
// entry's or batch's (r-<token>-<seq>, b-<token>-<seq>), whose random part
// the files show fixed (the same ID the same fixed one), keeping the seq.
var goldenIDs = regexp.MustCompile(`\b([jrb])-([0-9a-z]{6,})(-[0-9a-z]+)?\b`)

// goldenSpillNames matches the millisecond clock and the seq in a spill
// file's name (<label>.<stream>-<ms>-<seq>.log), which count every spill of
// the server: the files show 2026-01-01 and the name's order in the file.
var goldenSpillNames = regexp.MustCompile(`-[0-9]{13}-([0-9]+)\.log\b`)

// goldenPids matches a pid named in a note.
var goldenPids = regexp.MustCompile(`\(pid [0-9]+\)`)

// goldenDurations matches the duration in a status line of a view.
var goldenDurations = regexp.MustCompile(`(\[exit code -?[0-9]+ after )[0-9.]+m?s\b`)

// golden is one golden file: its name (without .json), the component
// schema it is an instance of, and what the code wrote.
type golden struct {
	name, schema string
	body         []byte
}

// TestGolden runs the commands whose answers the golden files show,
// normalises each answer and compares it with its file; every file is
// validated against its schema, and a file no case wrote fails the test.
func TestGolden(t *testing.T) {
	t.Parallel()
	g := newGoldenRun(t)
	var all []golden
	all = append(all, g.results()...)
	all = append(all, g.execEvents()...)
	all = append(all, g.jobs()...)
	all = append(all, g.errors()...)
	all = append(all, g.batch())

	c := loadContract(t)
	names := map[string]bool{}
	for _, gf := range all {
		names[gf.name+".json"] = true
		want := g.normalize(gf.body)
		path := filepath.Join(goldenDir, gf.name+".json")
		if *update {
			if err := os.MkdirAll(goldenDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (go test ./api -run TestGolden -update)", gf.name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the code writes (go test ./api -run TestGolden -update):\n%s", path,
				cmp.Diff(strings.Split(string(got), "\n"), strings.Split(string(want), "\n")))
		}
		c.validateJSON(t, path, gf.schema, got)
	}
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	for _, f := range files {
		if !names[filepath.Base(f)] {
			t.Errorf("%s: no case writes it", f)
		}
	}
}

// goldenRun is the server the golden values come from: a journal (batch
// and Result IDs), a model budget of 64 bytes and 4 lines a stream so a
// cut fits in a file, spill files of at most 4 KiB, a heartbeat of 100 ms.
type goldenRun struct {
	t    *testing.T
	e    *env
	data string // e.data with symlinks resolved
	cwd  string // the server's working directory: a session's first
	bash string // the shell the server runs, as PATH finds it
}

func newGoldenRun(t *testing.T) *goldenRun {
	e := newEnv(t, withToken(testToken), withJournal(t), withHeartbeat(100*time.Millisecond),
		func(_ *api.Config, c *supervisor.Config) {
			c.Budget.MaxBytes, c.Budget.MaxLines = 64, 4
			c.SpillMaxBytes = 4 << 10
		})
	data, err := filepath.EvalSymlinks(e.data)
	if err != nil {
		t.Fatal(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	return &goldenRun{t: t, e: e, data: data, cwd: cwd, bash: bash}
}

// want sends a request and returns the body, failing unless the status is
// status.
func (g *goldenRun) want(status int, method, path, body string, hdr ...string) []byte {
	g.t.Helper()
	code, b := g.e.do(context.Background(), method, path, body, hdr...)
	if code != status {
		g.t.Fatalf("%s %s: %d, want %d: %s", method, path, code, status, b)
	}
	return b
}

// results: an exit, a timeout, a cut with a whole spill, a cut whose spill
// stopped at the spill cap, and a yield handed over while the command
// waits for input.
func (g *goldenRun) results() []golden {
	g.t.Helper()
	out := []golden{
		{"result-exited", "Result", g.want(200, "POST", "/v1/exec", `{"command":"echo hello; echo warning >&2; exit 3"}`)},
		{"result-timed-out", "Result", g.want(200, "POST", "/v1/exec", `{"command":"echo started; sleep 30","timeout":1}`)},
		{"result-truncated-spill", "Result", g.want(200, "POST", "/v1/exec", `{"command":"seq 1000","session":"golden"}`)},
		{"result-truncated-partial-spill", "Result", g.want(200, "POST", "/v1/exec", `{"command":"seq 100000","session":"golden","label":"partial"}`)},
	}
	var st supervisor.JobStarted
	json.Unmarshal(g.want(200, "POST", "/v1/jobs", `{"command":"printf 'name? '; read x; echo hi $x","interactive":true}`), &st)
	res, err := g.e.sup.Jobs().Yield(context.Background(), st.ID, 20*time.Second)
	if err != nil || !res.Running || res.Waiting == nil {
		g.t.Fatalf("yield: %v %+v", err, res)
	}
	b, err := json.Marshal(res)
	if err != nil {
		g.t.Fatal(err)
	}
	g.want(204, "POST", "/v1/jobs/"+st.ID+"/stdin?close=true", "bob\n")
	g.want(200, "POST", "/v1/jobs/"+st.ID+"/wait?timeout=20", "")
	return append(out, golden{"result-yield-waiting", "Result", b})
}

// execEvents: the first line of each kind of POST /v1/exec's NDJSON: a
// command that prints on both streams; one past the live cap (capped); a
// terminal command that waits for input (waiting) and is silent past the
// heartbeat (keepalive).
func (g *goldenRun) execEvents() []golden {
	g.t.Helper()
	first := map[string][]byte{}
	take := func(body string) {
		b := g.want(200, "POST", "/v1/exec", body, "Accept", api.NDJSONType)
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev supervisor.Event
			json.Unmarshal(sc.Bytes(), &ev)
			key := ev.Event
			if ev.Stream != "" {
				key += "-" + string(ev.Stream)
			}
			if first[key] != nil {
				continue
			}
			first[key] = slices.Clone(sc.Bytes())
			if ev.Event == supervisor.EventCapped {
				// Its seq counts the output events before it, which
				// depends on how the reads fell: the file shows 11.
				ev.Seq = 11
				first[key], _ = json.Marshal(ev)
			}
		}
	}
	take(`{"command":"echo hello; echo warning >&2"}`)
	result := first["result"] // the plain command's, not the cut one's
	delete(first, "result")
	take(fmt.Sprintf(`{"command":"head -c %d /dev/zero | tr '\\0' a","stdoutPolicy":"tail"}`, supervisor.DefaultLiveCap+1))
	take(`{"command":"printf 'name? '; read x","tty":{"cols":40,"rows":5},"timeout":1}`)
	first["result"] = result
	var out []golden
	for _, k := range []string{"start", "output-stdout", "output-stderr", "capped-stdout", "waiting", "keepalive", "result"} {
		if first[k] == nil {
			g.t.Fatalf("no %s event; saw %v", k, slices.Collect(maps.Keys(first)))
		}
		schema := "ExecEvent"
		if k == "keepalive" {
			schema = "Keepalive"
		}
		out = append(out, golden{"exec-event-" + k, schema, first[k]})
	}
	return out
}

// jobs: GET /v1/jobs/{id} of a job running, waiting for input and exited
// (with its Result), and the /v1/events lines of its wait, its exit and a
// keepalive.
func (g *goldenRun) jobs() []golden {
	g.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := g.e.send(ctx, "GET", "/v1/events", "")
	defer resp.Body.Close()
	lines := make(chan []byte, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- slices.Clone(sc.Bytes())
		}
	}()
	next := func(kind string) []byte {
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					g.t.Fatalf("the event stream ended before %s", kind)
				}
				var ev struct{ Event string }
				json.Unmarshal(l, &ev)
				if ev.Event == kind {
					return l
				}
			case <-time.After(30 * time.Second):
				g.t.Fatalf("no %s event", kind)
			}
		}
	}
	keepalive := next("keepalive")

	var st supervisor.JobStarted
	json.Unmarshal(g.want(200, "POST", "/v1/jobs", `{"command":"echo started; sleep 1; printf 'name? '; read x; echo hi $x; exit 2","interactive":true}`), &st)
	var running []byte
	var js supervisor.JobStatus
	for deadline := time.Now().Add(20 * time.Second); js.StdoutBytes == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			g.t.Fatalf("the job printed nothing: %s", running)
		}
		running = g.want(200, "GET", "/v1/jobs/"+st.ID, "")
		json.Unmarshal(running, &js)
	}
	if js.State != supervisor.JobRunning || js.Waiting != nil || js.StdoutBytes != int64(len("started\n")) {
		g.t.Fatalf("not running with its first line and no wait: %s", running)
	}
	waitEvent := next("waiting")
	waiting := g.want(200, "GET", "/v1/jobs/"+st.ID, "")
	if json.Unmarshal(waiting, &js); js.Waiting == nil {
		g.t.Fatalf("not waiting: %s", waiting)
	}
	g.want(204, "POST", "/v1/jobs/"+st.ID+"/stdin?close=true", "bob\n")
	exitEvent := next("exited")
	exited := g.want(200, "GET", "/v1/jobs/"+st.ID, "")
	return []golden{
		{"job-status-running", "JobStatus", running},
		{"job-status-waiting", "JobStatus", waiting},
		{"job-status-exited", "JobStatus", exited},
		{"job-event-waiting", "JobEvent", waitEvent},
		{"job-event-exited", "JobEvent", exitEvent},
		{"job-event-keepalive", "Keepalive", keepalive},
	}
}

// errors: the error JSON of each code, from the request that gets it.
func (g *goldenRun) errors() []golden {
	g.t.Helper()
	binary := g.want(200, "POST", "/v1/exec", `{"command":"head -c 3000 /dev/zero","session":"golden","label":"binary"}`)
	var res supervisor.Result
	json.Unmarshal(binary, &res)
	if res.StdoutInfo.SpillPath == "" {
		g.t.Fatalf("no spill of the binary output: %s", binary)
	}
	var st supervisor.JobStarted
	json.Unmarshal(g.want(200, "POST", "/v1/jobs", `{"command":"sleep 30"}`), &st)
	defer g.want(200, "DELETE", "/v1/jobs/"+st.ID, "")

	internal := &bytes.Buffer{}
	api.NewEncoder(internal).Encode(api.NewErrorBody(errors.New("the journal's disk failed")))
	out := []golden{
		{"error-invalid-argument", "Error", g.want(400, "POST", "/v1/exec", `{"command":"true","timeout":301}`)},
		{"error-not-found", "Error", g.want(404, "GET", "/v1/jobs/j-0123456789abcdef", "")},
		{"error-tool-binary-content", "Error", g.want(400, "POST", "/v1/read", `{"path":`+jsonString(res.StdoutInfo.SpillPath)+`}`)},
		{"error-unauthenticated", "Error", g.want(401, "GET", "/v1/jobs", "", "Authorization", "Bearer wrong")},
		{"error-permission-denied", "Error", g.want(403, "POST", "/v1/exec", `{"command":"true"}`, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")},
		{"error-deadline-exceeded", "Error", g.want(408, "POST", "/v1/jobs/"+st.ID+"/wait?timeout=0", "")},
		{"error-resource-exhausted", "Error", g.want(413, "POST", "/v1/exec", `{"command":"`+strings.Repeat("x", api.MaxBodyBytes)+`"}`)},
		{"error-internal", "Error", internal.Bytes()},
	}
	// UNAVAILABLE: a server that shuts down.
	e := newEnv(g.t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		g.t.Fatal(err)
	}
	code, b := e.do(context.Background(), "POST", "/v1/exec", `{"command":"true"}`)
	if code != http.StatusServiceUnavailable {
		g.t.Fatalf("after Shutdown: %d %s", code, b)
	}
	return append(out, golden{"error-unavailable", "Error", b})
}

// batch: a batch of two, one of which fails.
func (g *goldenRun) batch() golden {
	g.t.Helper()
	return golden{"batch", "Batch", g.want(200, "POST", "/v1/batch",
		`{"session":"golden","requests":[{"command":"echo one"},{"command":"seq 3; exit 1"}]}`)}
}

// normalize sets the goldenFixed fields, drops goldenDropped, replaces in
// strings the data directory with /var/lib/corral, the server's working
// directory with /home/agent/project, the shell's path with /usr/bin/bash, IDs, spill names' clocks and pids
// with fixed ones (a batch's viewBytes and totalBytes follow its view),
// and indents the JSON, keeping the order of the keys as
// written.
func (g *goldenRun) normalize(b []byte) []byte {
	g.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := orderedValue(dec)
	if err != nil {
		g.t.Fatalf("%v: %s", err, b)
	}
	ids := map[string]string{}
	spills := map[string]string{} // a spill name's clock and seq, by name
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case orderedObject:
			var out orderedObject
			delta := int64(0) // what normalising a batch's view changed its length by
			for _, kv := range v {
				if slices.Contains(goldenDropped, kv.key) {
					continue
				}
				if fixed, ok := goldenFixed[kv.key]; ok {
					kv.value = fixed
				} else {
					before, _ := kv.value.(string)
					kv.value = walk(kv.value)
					if after, ok := kv.value.(string); ok && kv.key == "view" {
						delta = int64(len(after) - len(before))
					}
				}
				out = append(out, kv)
			}
			for i, kv := range out {
				if n, ok := kv.value.(json.Number); ok && (kv.key == "viewBytes" || kv.key == "totalBytes") {
					m, _ := n.Int64()
					out[i].value = m + delta
				}
			}
			return out
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
			return v
		case string:
			v = strings.ReplaceAll(v, g.data, "/var/lib/corral")
			v = strings.ReplaceAll(v, g.e.data, "/var/lib/corral")
			v = strings.ReplaceAll(v, g.cwd, "/home/agent/project")
			if v == g.bash {
				v = "/usr/bin/bash" // argv[0]
			}
			v = strings.ReplaceAll(v, g.bash+" (pid", "/usr/bin/bash (pid") // a note naming it
			v = goldenSpillNames.ReplaceAllStringFunc(v, func(name string) string {
				if spills[name] == "" {
					spills[name] = fmt.Sprintf("-1767225600000-%d.log", len(spills)+1)
				}
				return spills[name]
			})
			v = goldenPids.ReplaceAllString(v, "(pid 4242)")
			v = goldenDurations.ReplaceAllString(v, "${1}12ms")
			return goldenIDs.ReplaceAllStringFunc(v, func(id string) string {
				m := goldenIDs.FindStringSubmatch(id)
				if ids[m[2]] == "" {
					ids[m[2]] = fmt.Sprintf("%016x", 0xc0de0000+len(ids)+1)
				}
				return m[1] + "-" + ids[m[2]] + m[3]
			})
		}
		return v
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(walk(v)); err != nil {
		g.t.Fatal(err)
	}
	return out.Bytes()
}

// orderedObject is a JSON object that keeps the order of its keys.
type orderedObject []orderedField

type orderedField struct {
	key   string
	value any
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.key)
		b.Write(k)
		b.WriteByte(':')
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(kv.value); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// orderedValue decodes one JSON value, objects as orderedObject.
func orderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := orderedObject{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := orderedValue(dec)
			if err != nil {
				return nil, err
			}
			o = append(o, orderedField{k.(string), v})
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := orderedValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}
