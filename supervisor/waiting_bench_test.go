//go:build linux

package supervisor

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/corral-sh/corral/internal/proctest"
)

// BenchmarkWaitingLatency is the detection latency of a wait: from the
// $EPOCHREALTIME a shell prints just before its read to the moment the
// waiting event reaches an OnWaiting subscriber, on a stdin pipe and on a
// terminal; one op is one turn (the wait, then a line of input). Reports
// p50-ms and p95-ms.
//
//	go test -run '^$' -bench BenchmarkWaitingLatency -benchtime 200x ./supervisor
func BenchmarkWaitingLatency(b *testing.B) {
	for _, tty := range []bool{false, true} {
		b.Run(map[bool]string{false: "pipe", true: "tty"}[tty], func(b *testing.B) {
			s := newSup(b, Config{})
			seen := make(chan time.Time, 1)
			defer s.Jobs().OnWaiting(func(string, Waiting) {
				select {
				case seen <- time.Now():
				default:
				}
			})()
			req := JobRequest{Request: Request{Command: `while :; do echo "T$EPOCHREALTIME"; read -r x || exit; done`},
				Interactive: !tty, Lifetime: time.Hour}
			if tty {
				req.TTY = &TTYSize{}
			}
			st, err := s.Jobs().Start(req)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Jobs().Kill(st.ID)
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				var at time.Time
				select {
				case at = <-seen:
				case <-time.After(30 * time.Second):
					b.Fatal("no wait within 30 s")
				}
				out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, CursorNext, 0)
				if err != nil {
					b.Fatal(err)
				}
				if printed, ok := lastEpoch(out.Data); ok {
					lat = append(lat, at.Sub(printed))
				}
				if err := s.Jobs().Input(st.ID, []byte("\n"), false); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportPercentiles(b, lat)
		})
	}
}

// lastEpoch finds the last "T<seconds.micros>" line of data.
func lastEpoch(data string) (time.Time, bool) {
	i := strings.LastIndex(data, "T")
	if i < 0 {
		return time.Time{}, false
	}
	f := strings.Fields(data[i+1:])
	if len(f) == 0 {
		return time.Time{}, false
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(sec*1e9)), true
}

// reportPercentiles reports the p50 and p95 of lat in milliseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		b.Fatal("no latency measured")
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(float64(len(lat)), "samples")
}

// BenchmarkWaitingIdle is what 20 idle interactive jobs cost this process
// (as they cost corral serve): its CPU time (getrusage, the jobs' own time
// not included) over one op of 2 s with 20 jobs waiting for input, 10 on a
// stdin pipe and 10 on a terminal, all watched, against the same window
// with no job at all, in one run. Reports the CPU of each as a percentage
// of one core and the difference.
//
//	go test -run '^$' -bench BenchmarkWaitingIdle -benchtime 5x ./supervisor
func BenchmarkWaitingIdle(b *testing.B) {
	s := newSup(b, Config{MaxJobs: 64})
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	measure := func() float64 {
		runtime.GC()
		var used, wall time.Duration
		for range b.N {
			c0, t0 := cpu(), time.Now()
			time.Sleep(2 * time.Second)
			used += cpu() - c0
			wall += time.Since(t0)
		}
		return 100 * used.Seconds() / wall.Seconds()
	}
	b.ResetTimer()
	// The baseline: the supervisor with no job.
	idle := measure()

	var ids []string
	for i := range 20 {
		req := JobRequest{Request: Request{Command: `read -r x`}, Interactive: i%2 == 0, Lifetime: time.Hour}
		if i%2 == 1 {
			req.TTY = &TTYSize{}
		}
		st, err := s.Jobs().Start(req)
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, st.ID)
		defer s.Jobs().Kill(st.ID)
	}
	// Settled: every job found waiting, its scans backed off.
	deadline := time.Now().Add(60 * time.Second)
	for _, id := range ids {
		for time.Now().Before(deadline) {
			if info, _ := s.Jobs().Get(id); info.Waiting != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if info, _ := s.Jobs().Get(id); info.Waiting == nil {
			b.Fatalf("job %s not waiting within 60 s", id)
		}
	}
	// What starting them left (the emulators of the terminals' first
	// screens for their prompts) is not the idle cost.
	time.Sleep(3 * time.Second)
	profiled := os.Getenv("CORRAL_IDLE_PROFILE") // FILE: profile the watched window
	if profiled != "" {
		f, err := os.Create(profiled)
		if err != nil {
			b.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	watched := measure()
	b.ReportMetric(idle, "idle-cpu%")
	b.ReportMetric(watched, "watched-cpu%")
	b.ReportMetric(watched-idle, "added-cpu%")
}

// BenchmarkTTYFlood is a 1 GiB flood (head -c 1G /dev/zero) through a
// terminal job against the same through a pipe job, in one run, beside the
// kernel's floor for each: the same flood read with no corral in the way, a
// plain loop of 64 KiB reads of a creack/pty master (pty.Start) and of a
// pipe. Reports each throughput, corral's terminal/pipe ratio, the floor's,
// corral's share of each floor, and this process's peak RSS growth (VmHWM,
// reset before each of corral's floods) over each of corral's floods.
// Heavy (CORRAL_HEAVY=1).
//
//	CORRAL_HEAVY=1 go test -run '^$' -bench BenchmarkTTYFlood -benchtime 1x ./supervisor
func BenchmarkTTYFlood(b *testing.B) {
	proctest.Heavy(b)
	s := newSup(b, Config{})
	const size = 1 << 30
	flood := fmt.Sprintf("head -c %d /dev/zero", size)
	mibs := func(t0 time.Time) float64 { return size / time.Since(t0).Seconds() / (1 << 20) }
	corral := func(tty bool) (float64, int64) {
		req := Request{Command: flood, Timeout: 300 * time.Second}
		if tty {
			req.TTY = &TTYSize{}
		}
		resetHWM(b)
		before := hwmKB(b)
		t0 := time.Now()
		res, err := s.Run(context.Background(), req)
		if err != nil || res.StdoutInfo.TotalBytes != size {
			b.Fatalf("flood tty=%v: %v, %d bytes", tty, err, res.StdoutInfo.TotalBytes)
		}
		return mibs(t0), hwmKB(b) - before
	}
	// The floor: the same command, its output read by a plain loop.
	floor := func(tty bool) float64 {
		cmd := exec.Command("bash", "-c", flood)
		var r io.ReadCloser
		var err error
		t0 := time.Now()
		if tty {
			r, err = pty.Start(cmd)
		} else if r, err = cmd.StdoutPipe(); err == nil {
			err = cmd.Start()
		}
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, readChunk)
		var n int64
		for {
			k, err := r.Read(buf)
			n += int64(k)
			if err != nil {
				break // EOF, or EIO from a master whose slave closed
			}
		}
		cmd.Wait()
		if tty {
			r.Close()
		}
		if n != size {
			b.Fatalf("floor tty=%v: %d bytes", tty, n)
		}
		return mibs(t0)
	}
	var pipe, tty, floorPipe, floorTTY float64
	var pipeGrew, ttyGrew int64
	b.ResetTimer()
	for range b.N {
		floorPipe += floor(false)
		floorTTY += floor(true)
		v, g := corral(false)
		pipe, pipeGrew = pipe+v, max(pipeGrew, g)
		v, g = corral(true)
		tty, ttyGrew = tty+v, max(ttyGrew, g)
	}
	n := float64(b.N)
	b.ReportMetric(pipe/n, "pipe-MiB/s")
	b.ReportMetric(tty/n, "tty-MiB/s")
	b.ReportMetric(floorPipe/n, "floor-pipe-MiB/s")
	b.ReportMetric(floorTTY/n, "floor-tty-MiB/s")
	b.ReportMetric(tty/pipe, "tty/pipe")
	b.ReportMetric(floorTTY/floorPipe, "floor-tty/floor-pipe")
	b.ReportMetric(tty/floorTTY, "tty/floor-tty")
	b.ReportMetric(pipe/floorPipe, "pipe/floor-pipe")
	b.ReportMetric(float64(pipeGrew), "pipe-hwm-growth-kB")
	b.ReportMetric(float64(ttyGrew), "tty-hwm-growth-kB")
}

// resetHWM resets this process's peak resident set (VmHWM) to its current
// one (proc(5), /proc/PID/clear_refs: "5").
func resetHWM(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatal(err)
	}
}

// hwmKB is this process's peak resident set (VmHWM) in kB.
func hwmKB(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
