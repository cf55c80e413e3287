//go:build linux

package supervisor

import (
	"context"
	"fmt"
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
// (as they cost corral serve): its CPU time (getrusage) over one op of 2 s
// with 20 jobs waiting for input on a pipe or a terminal (watched), against
// the same 20 jobs asleep without input (not watched), in one run. Reports
// the CPU of each as a percentage of one core and the difference.
//
//	go test -run '^$' -bench BenchmarkWaitingIdle -benchtime 3x ./supervisor
func BenchmarkWaitingIdle(b *testing.B) {
	s := newSup(b, Config{MaxJobs: 64})
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := func(watched bool) []string {
		var ids []string
		for i := range 20 {
			req := JobRequest{Request: Request{Command: `sleep 3600`}, Lifetime: time.Hour}
			if watched {
				req = JobRequest{Request: Request{Command: `read -r x`}, Interactive: i%2 == 0, Lifetime: time.Hour}
				if i%2 == 1 {
					req.TTY = &TTYSize{}
				}
			}
			st, err := s.Jobs().Start(req)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, st.ID)
		}
		// Settled: every watched job found waiting, its scans backed off.
		deadline := time.Now().Add(60 * time.Second)
		for _, id := range ids {
			for watched && time.Now().Before(deadline) {
				if info, _ := s.Jobs().Get(id); info.Waiting != nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		// What starting them left (the emulators of the terminals' first
		// screens, cgroups of earlier jobs removed in the background) is
		// not the idle cost.
		time.Sleep(3 * time.Second)
		runtime.GC()
		return ids
	}
	profiled := false // CORRAL_IDLE_PROFILE=FILE profiles the watched window
	measure := func(ids []string) float64 {
		var used, wall time.Duration
		if p := os.Getenv("CORRAL_IDLE_PROFILE"); p != "" && !profiled {
			profiled = true
			f, _ := os.Create(p)
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
		for range b.N {
			c0, t0 := cpu(), time.Now()
			time.Sleep(2 * time.Second)
			used += cpu() - c0
			wall += time.Since(t0)
		}
		for _, id := range ids {
			s.Jobs().Kill(id)
		}
		return 100 * used.Seconds() / wall.Seconds()
	}
	b.ResetTimer()
	watched := measure(start(true))
	idle := measure(start(false))
	b.ReportMetric(idle, "idle-cpu%")
	b.ReportMetric(watched, "watched-cpu%")
	b.ReportMetric(watched-idle, "added-cpu%")
}

// BenchmarkTTYFlood is a 1 GiB flood (head -c 1G /dev/zero) through a
// terminal against the same through a pipe, in one run: the throughput of
// each, their ratio, this process's peak RSS growth (VmHWM) over the
// terminal's flood, and the kernel's own terminal throughput (script(1)
// reading a PTY, without corral) with corral's ratio to it. Heavy
// (CORRAL_HEAVY=1).
//
//	CORRAL_HEAVY=1 go test -run '^$' -bench BenchmarkTTYFlood -benchtime 1x ./supervisor
func BenchmarkTTYFlood(b *testing.B) {
	proctest.Heavy(b)
	s := newSup(b, Config{})
	const size = 1 << 30
	flood := func(tty bool) float64 {
		req := Request{Command: fmt.Sprintf("head -c %d /dev/zero", size), Timeout: 300 * time.Second}
		if tty {
			req.TTY = &TTYSize{}
		}
		t0 := time.Now()
		res, err := s.Run(context.Background(), req)
		if err != nil || res.StdoutInfo.TotalBytes != size {
			b.Fatalf("flood tty=%v: %v, %d bytes", tty, err, res.StdoutInfo.TotalBytes)
		}
		return size / time.Since(t0).Seconds() / (1 << 20)
	}
	// The kernel's own ceiling for a terminal: script(1) reading a PTY's
	// master to /dev/null, no corral in the way.
	script := func() float64 {
		if _, err := exec.LookPath("script"); err != nil {
			return 0
		}
		t0 := time.Now()
		cmd := exec.Command("script", "-qc", fmt.Sprintf("head -c %d /dev/zero", size), "/dev/null")
		if err := cmd.Run(); err != nil {
			b.Fatalf("script: %v", err)
		}
		return size / time.Since(t0).Seconds() / (1 << 20)
	}
	var pipe, tty, kernel float64
	var grew int64
	b.ResetTimer()
	for range b.N {
		pipe += flood(false)
		before := hwmKB(b)
		tty += flood(true)
		grew = max(grew, hwmKB(b)-before)
		kernel += script()
	}
	n := float64(b.N)
	b.ReportMetric(pipe/n, "pipe-MiB/s")
	b.ReportMetric(tty/n, "tty-MiB/s")
	b.ReportMetric(kernel/n, "script-MiB/s")
	b.ReportMetric(tty/pipe, "tty/pipe")
	if kernel > 0 {
		b.ReportMetric(tty/kernel, "tty/script")
	}
	b.ReportMetric(float64(grew), "hwm-growth-kB")
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
