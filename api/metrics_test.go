package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/api/envd"
	envdpb "github.com/corral-sh/corral/api/envd/processpb"
	"github.com/corral-sh/corral/api/envd/processpb/processpbconnect"
	"github.com/corral-sh/corral/api/sandboxd"
	sandboxdpb "github.com/corral-sh/corral/api/sandboxd/processpb"
)

// scrape GETs /metrics with accept ("" for none) and decodes it with the
// Prometheus decoder of the format the response names (expfmt), failing
// the test when it is not wantType or does not parse.
func scrape(t *testing.T, e *env, accept string, wantType expfmt.FormatType) map[string]*dto.MetricFamily {
	t.Helper()
	var hdr []string
	if accept != "" {
		hdr = []string{"Accept", accept}
	}
	resp := e.send(context.Background(), "GET", "/metrics", "", hdr...)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// The Content-Type as it is: ResponseFormat knows no OpenMetrics.
	format := expfmt.Format(resp.Header.Get("Content-Type"))
	if got := format.FormatType(); got != wantType {
		t.Fatalf("GET /metrics with Accept %q: Content-Type %q, want format %v", accept, resp.Header.Get("Content-Type"), wantType)
	}
	if wantType == expfmt.TypeOpenMetrics && !strings.HasSuffix(string(body), "# EOF\n") {
		t.Fatalf("OpenMetrics body does not end with # EOF:\n%s", body)
	}
	fams := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(strings.NewReader(string(body)), format)
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode %v: %v\n%s", wantType, err, body)
		}
		fams[mf.GetName()] = &mf
	}
	return fams
}

// family returns the family name of fams; OpenMetrics names a counter's
// family without its _total, which the text format keeps.
func family(t *testing.T, fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	t.Helper()
	if f, ok := fams[name]; ok {
		return f
	}
	if f, ok := fams[strings.TrimSuffix(name, "_total")]; ok {
		return f
	}
	t.Fatalf("no family %s in /metrics", name)
	return nil
}

// sample returns the value of the sample of f whose labels are labels
// (name=value pairs), failing the test when there is none.
func sample(t *testing.T, f *dto.MetricFamily, labels ...string) float64 {
	t.Helper()
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)/2
		for i := 0; match && i < len(labels); i += 2 {
			match = got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		}
	}
	t.Fatalf("%s has no sample %v", f.GetName(), labels)
	return 0
}

// metricsFaces serves the envd and sandboxd faces over e's supervisor,
// observed by e's server, and returns their clients.
func metricsFaces(t *testing.T, e *env) (processpbconnect.ProcessClient, sandboxdpb.ProcessServiceClient) {
	t.Helper()
	ev, err := envd.New(envd.Config{Supervisor: e.sup, Observe: e.srv.Observer(api.FaceEnvd)})
	if err != nil {
		t.Fatal(err)
	}
	ets := httptest.NewServer(ev.Handler())
	etr := &http.Transport{}
	sb, err := sandboxd.New(sandboxd.Config{Supervisor: e.sup, RootDir: t.TempDir(), Observe: e.srv.Observer(api.FaceSandboxd)})
	if err != nil {
		t.Fatal(err)
	}
	g := sb.GRPCServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { g.Serve(ln); close(served) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		e.sup.Close() // ends every job, so the envd streams and the observers end
		g.Stop()
		<-served
		ets.Close()
		etr.CloseIdleConnections()
		ev.Close()
		sb.Close()
	})
	return processpbconnect.NewProcessClient(&http.Client{Transport: etr}, ets.URL), sandboxdpb.NewProcessServiceClient(conn)
}

// TestMetricsFamilies scrapes /metrics in the text format and in
// OpenMetrics and parses both with the Prometheus decoder: the Go and
// process collectors, corral_build_info, corral_jobs by state and every
// face and outcome of corral_commands_total are there from the start at 0;
// a command through each face (HTTP, MCP, envd, sandboxd) moves its face's
// success and no other; background jobs move corral_jobs.
func TestMetricsFamilies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the process collector and waiting for input are Linux's")
	}
	t.Parallel()
	e := newEnv(t)
	envdc, sandboxc := metricsFaces(t, e)
	formats := []struct {
		name   string
		accept string
		typ    expfmt.FormatType
	}{
		{"text", "", expfmt.TypeTextPlain},
		{"OpenMetrics", "application/openmetrics-text; version=1.0.0; charset=utf-8", expfmt.TypeOpenMetrics},
	}
	for _, f := range formats {
		fams := scrape(t, e, f.accept, f.typ)
		for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds",
			"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
			"corral_build_info", "corral_jobs", "corral_commands_total", "corral_command_duration_seconds",
			"corral_drained_bytes_total", "corral_processes_killed_total", "corral_processes_lingering_total",
			"corral_commands_running", "corral_memory_limit_bytes", "corral_journal_offline",
			"corral_journal_write_errors_total"} {
			family(t, fams, name)
		}
		bi := family(t, fams, "corral_build_info")
		if v := sample(t, bi, "version", "test", "goversion", runtime.Version(), "revision", revision(t)); v != 1 {
			t.Errorf("%s: corral_build_info %v, want 1", f.name, v)
		}
		for _, face := range api.Faces {
			for _, o := range api.Outcomes {
				if v := sample(t, family(t, fams, "corral_commands_total"), "face", face, "outcome", o); v != 0 {
					t.Errorf("%v: corral_commands_total{face=%q,outcome=%q} = %v at the start, want 0", f.name, face, o, v)
				}
			}
		}
		if n := len(family(t, fams, "corral_commands_total").GetMetric()); n != len(api.Faces)*len(api.Outcomes) {
			t.Errorf("%v: corral_commands_total has %d series, want %d", f.name, n, len(api.Faces)*len(api.Outcomes))
		}
		for _, st := range []string{"running", "waiting", "exited"} {
			if v := sample(t, family(t, fams, "corral_jobs"), "state", st); v != 0 {
				t.Errorf("%v: corral_jobs{state=%q} = %v at the start, want 0", f.name, st, v)
			}
		}
	}

	// One `true` through each face.
	if res := e.exec(`{"command":"true"}`); res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("HTTP true: %+v", res)
	}
	cs := inMemoryMCP(t, e)
	if r := callRaw(t, cs, "bash", `{"command":"true"}`); r.IsError {
		t.Fatalf("MCP bash true: %+v", r.Content[0].(*mcp.TextContent).Text)
	}
	no := false
	st, err := envdc.Start(context.Background(), connect.NewRequest(&envdpb.StartRequest{
		Process: &envdpb.ProcessConfig{Cmd: "/bin/true"}, Stdin: &no}))
	if err != nil {
		t.Fatal(err)
	}
	for st.Receive() {
	}
	if err := st.Err(); err != nil {
		t.Fatalf("envd Start: %v", err)
	}
	st.Close()
	if _, err := sandboxc.Execute(context.Background(), &sandboxdpb.ExecuteRequest{
		Config: &sandboxdpb.ProcessConfig{Command: []string{"true"}}}); err != nil {
		t.Fatalf("sandboxd Execute: %v", err)
	}
	// Background jobs: one running, one waiting for its input.
	if code, b := e.do(context.Background(), "POST", "/v1/jobs", `{"command":"sleep 60"}`); code != 200 {
		t.Fatalf("job: %d %s", code, b)
	}
	if code, b := e.do(context.Background(), "POST", "/v1/jobs", `{"command":"read x","interactive":true}`); code != 200 {
		t.Fatalf("job: %d %s", code, b)
	}

	// The envd process is counted once its end was seen, and the waiting
	// job once the kernel shows its read: poll until both show.
	deadline := time.Now().Add(20 * time.Second)
	for _, f := range formats {
		for {
			fams := scrape(t, e, f.accept, f.typ)
			cmds := family(t, fams, "corral_commands_total")
			jobs := family(t, fams, "corral_jobs")
			var got []string
			for _, face := range api.Faces {
				for _, o := range api.Outcomes {
					want := 0.0
					if o == api.OutcomeSuccess {
						want = 1
					}
					if v := sample(t, cmds, "face", face, "outcome", o); v != want {
						got = append(got, fmt.Sprintf("corral_commands_total{face=%q,outcome=%q} = %v, want %v", face, o, v, want))
					}
				}
			}
			for st, want := range map[string]float64{"running": 1, "waiting": 1} {
				if v := sample(t, jobs, "state", st); v != want {
					got = append(got, fmt.Sprintf("corral_jobs{state=%q} = %v, want %v", st, v, want))
				}
			}
			if len(got) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s:\n%s", f.name, strings.Join(got, "\n"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Killing the jobs makes them exited and retained; each counts once,
	// under http, as aborted (a kill is an abort).
	for _, j := range e.sup.Jobs().List() {
		if j.State == "running" {
			if code, b := e.do(context.Background(), "DELETE", "/v1/jobs/"+j.ID, ""); code != 200 {
				t.Fatalf("kill %s: %d %s", j.ID, code, b)
			}
		}
	}
	for {
		fams := scrape(t, e, "", expfmt.TypeTextPlain)
		jobs := family(t, fams, "corral_jobs")
		ended := sample(t, family(t, fams, "corral_commands_total"), "face", api.FaceHTTP, "outcome", api.OutcomeAborted)
		if sample(t, jobs, "state", "running") == 0 && sample(t, jobs, "state", "waiting") == 0 &&
			sample(t, jobs, "state", "exited") == 3 && ended == 2 {
			break // the envd process's job and the two killed
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the kills: corral_jobs %v, http aborted %v", jobs.GetMetric(), ended)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// revision is the revision corral_build_info should carry: the binary's
// VCS stamp (a test binary has none), "-dirty" for a modified tree.
func revision(t *testing.T) string {
	t.Helper()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev != "" {
		rev += "-dirty"
	}
	return rev
}
