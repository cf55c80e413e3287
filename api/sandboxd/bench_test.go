//go:build unix

package sandboxd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/api/sandboxd"
	"github.com/corral-sh/corral/api/sandboxd/processpb"
	"github.com/corral-sh/corral/supervisor"
)

// bench is one supervisor behind both faces: POST /v1/exec and sandboxd's
// gRPC, both on loopback.
type bench struct {
	exec   string
	hc     *http.Client
	client processpb.ProcessServiceClient
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
	svc, err := sandboxd.New(sandboxd.Config{Supervisor: sup, RootDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	g := svc.GRPCServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan struct{})
	go func() { g.Serve(ln); close(served) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	b.Cleanup(func() {
		conn.Close()
		sup.Close()
		g.Stop()
		<-served
		ts.Close()
		tr.CloseIdleConnections()
		svc.Close()
	})
	return &bench{exec: ts.URL, hc: &http.Client{Transport: tr}, client: processpb.NewProcessServiceClient(conn)}
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkRoundTrip is `true` through POST /v1/exec (the Result JSON) and
// through sandboxd Execute in the same loop, one after the other, over
// loopback on one supervisor, so that all see the same machine load:
//
//   - exec: POST /v1/exec of `true` (bash's builtin);
//   - execute-true: Execute of the program true (argv, no shell);
//   - execute-sh: Execute of /bin/sh -c true, what agent-sandbox's Go SDK
//     sends for Commands.Run("true").
//
// It reports each median and execute-true/exec and execute-sh/exec (goal:
// 1.2× or less).
func BenchmarkRoundTrip(b *testing.B) {
	bn := newBench(b)
	var execs, trues, shs []time.Duration
	execute := func(argv ...string) time.Duration {
		begin := time.Now()
		resp, err := bn.client.Execute(context.Background(), &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: argv}})
		if err != nil || resp.ExitCode != 0 {
			b.Fatalf("Execute %q: %v %v", argv, resp, err)
		}
		return time.Since(begin)
	}
	for b.Loop() {
		begin := time.Now()
		resp, err := bn.hc.Post(bn.exec+"/v1/exec", "application/json", strings.NewReader(`{"command":"true"}`))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		execs = append(execs, time.Since(begin))
		trues = append(trues, execute("true"))
		shs = append(shs, execute("/bin/sh", "-c", "true"))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	e, t, s := median(execs), median(trues), median(shs)
	b.ReportMetric(ms(e), "exec-ms")
	b.ReportMetric(ms(t), "execute-true-ms")
	b.ReportMetric(ms(s), "execute-sh-ms")
	b.ReportMetric(float64(t)/float64(e), "execute-true/exec")
	b.ReportMetric(float64(s)/float64(e), "execute-sh/exec")
}

// BenchmarkFlood streams a flood of zeros (256 MiB; CORRAL_BENCH_FLOOD_MIB
// sets another size, 2048 for the 2 GiB figure) through POST /v1/exec
// NDJSON and through sandboxd Start to the Go client, in the same loop,
// alternating. Throughput is the flood's size over the time to the end of
// the stream; it reports both, start/exec, the share of the bytes the
// Start client received (it was told of the rest as skipped), and this
// process's peak RSS (server and both clients together).
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
	bn := newBench(b)
	var execT, startT time.Duration
	var got int64
	for b.Loop() {
		begin := time.Now()
		req, _ := http.NewRequest("POST", bn.exec+"/v1/exec", strings.NewReader(string(body)))
		req.Header.Set("Accept", "application/x-ndjson")
		resp, err := bn.hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
		}
		resp.Body.Close()
		execT += time.Since(begin)

		begin = time.Now()
		st, err := bn.client.Start(context.Background(), &processpb.StartRequest{Config: &processpb.ProcessConfig{Command: []string{"/bin/sh", "-c", script}}})
		if err != nil {
			b.Fatal(err)
		}
		for {
			ev, err := st.Recv()
			if err != nil {
				break
			}
			got += int64(len(ev.GetStdout()))
		}
		startT += time.Since(begin)
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(execT), "exec-MB/s")
	b.ReportMetric(mbps(startT), "start-MB/s")
	b.ReportMetric(mbps(startT)/mbps(execT), "start/exec")
	b.ReportMetric(float64(got)/float64(size)/float64(b.N), "received/total")
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MB")
	}
}
