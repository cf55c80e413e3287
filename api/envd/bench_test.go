package envd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/api/envd"
	"github.com/corral-sh/corral/api/envd/processpb"
	"github.com/corral-sh/corral/api/envd/processpb/processpbconnect"
	"github.com/corral-sh/corral/supervisor"
)

// bench is one supervisor behind both faces: POST /v1/exec and envd.
type bench struct {
	exec   string // the API server's URL
	client processpbconnect.ProcessClient
	hc     *http.Client
}

func newBench(b *testing.B) *bench {
	b.Helper()
	sup, err := supervisor.New(supervisor.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := api.New(api.Config{Supervisor: sup})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := envd.New(envd.Config{Supervisor: sup})
	if err != nil {
		b.Fatal(err)
	}
	ts, es := httptest.NewServer(srv.Handler()), httptest.NewServer(svc.Handler())
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	b.Cleanup(func() {
		sup.Close()
		ts.Close()
		es.Close()
		tr.CloseIdleConnections()
	})
	hc := &http.Client{Transport: tr}
	return &bench{exec: ts.URL, client: processpbconnect.NewProcessClient(hc, es.URL), hc: hc}
}

// execNDJSON runs body through POST /v1/exec with NDJSON events and reads
// the stream to its end.
func (bn *bench) execNDJSON(b *testing.B, body string) {
	req, _ := http.NewRequest("POST", bn.exec+"/v1/exec", strings.NewReader(body))
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := bn.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	last := ""
	for sc.Scan() {
		last = sc.Text()
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(last, `{"event":"result"`) {
		b.Fatalf("exec: status %d, last line %.200s", resp.StatusCode, last)
	}
}

// start runs cfg through envd Start and reads the stream to its end; it
// returns the output bytes received.
func (bn *bench) start(b *testing.B, cfg *processpb.ProcessConfig) int64 {
	no := false
	s, err := bn.client.Start(context.Background(), connect.NewRequest(&processpb.StartRequest{Process: cfg, Stdin: &no}))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n int64
	var end *processpb.ProcessEvent_EndEvent
	for s.Receive() {
		ev := s.Msg().GetEvent()
		n += int64(len(ev.GetData().GetStdout()))
		if e := ev.GetEnd(); e != nil {
			end = e
		}
	}
	if s.Err() != nil || end.GetExitCode() != 0 {
		b.Fatalf("start: %v, end %v", s.Err(), end)
	}
	return n
}

// BenchmarkRoundTrip is `true` through POST /v1/exec (the Result JSON) and
// through envd Start (the stream read to its end event) in the same loop,
// one after the other, over loopback on one supervisor, so that all see the
// same machine load:
//
//   - exec-builtin: POST /v1/exec of `true`, bash's builtin (no exec);
//   - exec-bin: POST /v1/exec of `/bin/true`: bash execs the program;
//   - envd-true: Start of the program true, run as envd runs it (no shell);
//   - envd-bash: Start of /bin/bash -l -c true, exactly what the E2B SDK's
//     commands.run('true') sends: one bash, a login shell, which reads the
//     login profile and runs the builtin.
//
// It reports each one's median, envd-true/exec-bin (the envd face and a
// job against a command that execs the same program from bash) and
// envd-bash/exec-builtin (the SDK's shape against the cheapest exec; goal
// 1.2×).
func BenchmarkRoundTrip(b *testing.B) {
	// The login shell reads the login profile: /etc/profile, and the
	// home's, which is left empty here, so that the figure is corral's and
	// the system's, not what a user's ~/.profile starts (on the machine the
	// figures were taken on it initialises pyenv: seconds).
	b.Setenv("HOME", b.TempDir())
	bn := newBench(b)
	var builtin, bin, trues, bashes []time.Duration
	direct := &processpb.ProcessConfig{Cmd: "true"}
	sdk := &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "true"}}
	exec := func(body string) time.Duration {
		begin := time.Now()
		resp, err := bn.hc.Post(bn.exec+"/v1/exec", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(begin)
	}
	start := func(cfg *processpb.ProcessConfig) time.Duration {
		begin := time.Now()
		bn.start(b, cfg)
		return time.Since(begin)
	}
	for b.Loop() {
		builtin = append(builtin, exec(`{"command":"true"}`))
		bin = append(bin, exec(`{"command":"/bin/true"}`))
		trues = append(trues, start(direct))
		bashes = append(bashes, start(sdk))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	eb, ex, et, es := median(builtin), median(bin), median(trues), median(bashes)
	b.ReportMetric(ms(eb), "exec-builtin-ms")
	b.ReportMetric(ms(ex), "exec-bin-ms")
	b.ReportMetric(ms(et), "envd-true-ms")
	b.ReportMetric(ms(es), "envd-bash-ms")
	b.ReportMetric(float64(et)/float64(ex), "envd-true/exec-bin")
	b.ReportMetric(float64(es)/float64(eb), "envd-bash/exec-builtin")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkFlood streams a flood of zeros (256 MiB; CORRAL_BENCH_FLOOD_MIB
// sets another size, 2048 for the 2 GiB figure) through POST /v1/exec
// NDJSON and through envd Start to a Go client (binary protobuf), in the
// same loop, alternating. Throughput is the flood's size over the time to
// the end of the stream; it reports both, their ratio envd/exec, and the
// share of the bytes the envd client received (it was told of the rest as
// skipped).
func BenchmarkFlood(b *testing.B) {
	mib := 256
	if v := os.Getenv("CORRAL_BENCH_FLOOD_MIB"); v != "" {
		var err error
		if mib, err = strconv.Atoi(v); err != nil || mib < 1 {
			b.Fatalf("CORRAL_BENCH_FLOOD_MIB=%q", v)
		}
	}
	size := int64(mib) << 20
	script := fmt.Sprintf("head -c %d /dev/zero", size)
	body, _ := json.Marshal(map[string]string{"command": script})
	cfg := &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", script}}
	bn := newBench(b)
	var execT, envdT time.Duration
	var got int64
	for b.Loop() {
		begin := time.Now()
		bn.execNDJSON(b, string(body))
		execT += time.Since(begin)
		begin = time.Now()
		got += bn.start(b, cfg)
		envdT += time.Since(begin)
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(execT), "exec-MB/s")
	b.ReportMetric(mbps(envdT), "envd-MB/s")
	b.ReportMetric(mbps(envdT)/mbps(execT), "envd/exec")
	b.ReportMetric(float64(got)/float64(size)/float64(b.N), "received/total")
}
