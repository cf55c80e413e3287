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
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/api/sandboxd"
	"github.com/corral-sh/corral/api/sandboxd/processpb"
	"github.com/corral-sh/corral/supervisor"
)

// bench is one corral in a process of its own (this test binary, re-run
// as benchServer) serving POST /v1/exec and sandboxd's gRPC on loopback,
// and the clients of both faces in this process: what the server spends
// is measured apart from what the clients spend, and its peak RSS is
// corral's alone.
type bench struct {
	exec   string
	hc     *http.Client
	client processpb.ProcessServiceClient
	server *exec.Cmd
}

func init() { benchServerMain = benchServer }

// benchServer serves one supervisor through both faces on loopback, prints
// "EXEC-URL GRPC-ADDR" on stdout, and serves until stdin ends.
func benchServer() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, "bench server:", err); os.Exit(2) }
	dir, err := os.MkdirTemp("", "corral-bench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	os.Mkdir(dir+"/data", 0o700)
	os.Mkdir(dir+"/root", 0o700)
	sup, err := supervisor.New(supervisor.Config{DataDir: dir + "/data"})
	if err != nil {
		fail(err)
	}
	srv, err := api.New(api.Config{Supervisor: sup})
	if err != nil {
		fail(err)
	}
	svc, err := sandboxd.New(sandboxd.Config{Supervisor: sup, RootDir: dir + "/root"})
	if err != nil {
		fail(err)
	}
	g := svc.GRPCServer()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	go g.Serve(gl)
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(hl)
	fmt.Printf("http://%s %s\n", hl.Addr(), gl.Addr())
	io.Copy(io.Discard, os.Stdin)
	sup.Close()
	g.Stop()
	hs.Close()
	svc.Close()
	os.RemoveAll(dir)
	os.Exit(0)
}

func newBench(b *testing.B) *bench {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var execURL, grpcAddr string
	if _, err := fmt.Fscan(bufio.NewReader(stdout), &execURL, &grpcAddr); err != nil {
		stdin.Close()
		cmd.Wait()
		b.Fatalf("bench server: %v", err)
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	b.Cleanup(func() {
		conn.Close()
		tr.CloseIdleConnections()
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("bench server: %v", err)
		}
	})
	return &bench{exec: execURL, hc: &http.Client{Transport: tr}, client: processpb.NewProcessServiceClient(conn), server: cmd}
}

// serverCPU is the CPU time the bench server has used so far (user and
// system, /proc/PID/stat), or 0 where that cannot be read.
func (bn *bench) serverCPU() time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", bn.server.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses.
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// serverPeakRSS is the bench server's peak resident set (VmHWM) in MB.
func (bn *bench) serverPeakRSS() float64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", bn.server.Process.Pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return -1
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
// server's peak RSS (corral's alone: the clients run in this process).
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
	var execT, startT, execCPU, startCPU time.Duration
	var got int64
	for b.Loop() {
		begin, cpu := time.Now(), bn.serverCPU()
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
		execCPU += bn.serverCPU() - cpu

		begin, cpu = time.Now(), bn.serverCPU()
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
		startCPU += bn.serverCPU() - cpu
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(execT), "exec-MB/s")
	b.ReportMetric(mbps(startT), "start-MB/s")
	b.ReportMetric(mbps(startT)/mbps(execT), "start/exec")
	b.ReportMetric(float64(got)/float64(size)/float64(b.N), "received/total")
	gib := float64(size) * float64(b.N) / (1 << 30)
	b.ReportMetric(execCPU.Seconds()/gib, "exec-server-cpu-s/GiB")
	b.ReportMetric(startCPU.Seconds()/gib, "start-server-cpu-s/GiB")
	b.ReportMetric(bn.serverPeakRSS(), "server-peak-rss-MB")
}
