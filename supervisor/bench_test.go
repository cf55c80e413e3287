package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
)

// The performance targets, checked by the benchmarks below against
// a baseline measured in the same run. They are reported, not asserted: a
// shared machine makes timed assertions flaky.
const (
	overheadTarget = 1.10 // corral/exec time for `true`, at most
	drainTarget    = 0.95 // corral/exec throughput, at least
	peakRSSTarget  = 24   // MB of VmHWM while draining 4 GB, at most
)

// drainBytes is what BenchmarkDrain pushes through one run: 2 GiB, 256 MiB
// with -short.
func drainBytes() int64 {
	if testing.Short() {
		return 256 << 20
	}
	return 2 << 30
}

// peakBytes is what BenchmarkDrainPeakRSS drains: 4 GiB, 256 MiB with -short.
func peakBytes() int64 {
	if testing.Short() {
		return 256 << 20
	}
	return 4 << 30
}

func init() {
	proctest.Register("drain-rss", helperDrainRSS)
}

// helperDrainRSS is a helper process: "drain-rss <bytes> corral|idle". With
// corral it builds a Supervisor and runs `head -c <bytes> /dev/zero` through
// it; with idle it runs nothing (the test binary's own floor). Either way it
// then prints "<VmHWM kB> <stdout bytes seen>" on stdout.
func helperDrainRSS(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: drain-rss <bytes> corral|idle")
		return 2
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain-rss:", err)
		return 2
	}
	var seen int64
	switch args[1] {
	case "idle":
	case "corral":
		s, err := New(Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "drain-rss:", err)
			return 1
		}
		res, err := s.Run(context.Background(), Request{
			Command: fmt.Sprintf("head -c %d /dev/zero", n), Timeout: MaxTimeout})
		s.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "drain-rss:", err)
			return 1
		}
		seen = res.StdoutInfo.TotalBytes
	default:
		fmt.Fprintln(os.Stderr, "drain-rss: unknown mode", args[1])
		return 2
	}
	hwm, err := vmHWM()
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain-rss:", err)
		return 1
	}
	fmt.Printf("%d %d\n", hwm, seen)
	return 0
}

// vmHWM returns this process's peak resident set size in kB.
func vmHWM() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

// benchSup returns a Supervisor in tier (the strongest when ""), closed at cleanup.
func benchSup(b *testing.B, tier killtree.Tier) *Supervisor {
	b.Helper()
	return newSup(b, Config{Containment: killtree.Config{Tier: tier}})
}

// runTrue runs `true` through s and fails b unless it exited 0.
func runTrue(b *testing.B, s *Supervisor) {
	res, err := s.Run(context.Background(), Request{Command: "true"})
	if err != nil {
		b.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 {
		b.Fatalf("true: exitCode %v signal %q", res.ExitCode, res.Signal)
	}
}

// execTrue is the baseline: the same shell, plain os/exec.
func execTrue(b *testing.B, shell string) {
	if err := exec.Command(shell, "-c", "true").Run(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkOverhead times `true` through plain os/exec and through Run in
// every containment tier that works here.
func BenchmarkOverhead(b *testing.B) {
	shell := benchSup(b, "").shell
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			execTrue(b, shell)
		}
	})
	for _, tier := range tiers(b) {
		b.Run("corral-"+string(tier), func(b *testing.B) {
			s := benchSup(b, tier)
			for b.Loop() {
				runTrue(b, s)
			}
		})
	}
}

// BenchmarkOverheadRatio alternates the baseline and Run in one loop, per
// tier, so both see the same machine, and reports ratio = mean corral time
// / mean exec time (target at most 1.10), and median-ratio, the same with
// medians, which a shared machine's spikes move less. The <tier>-reaper
// rows run every command under its own reaper (killtree.Config.Reaper): a
// Go runtime start per command, not a default for that reason.
func BenchmarkOverheadRatio(b *testing.B) {
	for _, tier := range tiers(b) {
		for _, reaper := range []bool{false, true} {
			name := string(tier)
			if reaper {
				name += "-reaper"
			}
			b.Run(name, func(b *testing.B) { overheadRatio(b, tier, reaper) })
		}
	}
}

// overheadRatio is one row of BenchmarkOverheadRatio.
func overheadRatio(b *testing.B, tier killtree.Tier, reaper bool) {
	s := newSup(b, Config{Containment: killtree.Config{Tier: tier, Reaper: reaper}})
	var tExec, tCorral []time.Duration
	i := 0
	for b.Loop() {
		// Alternate which goes first, so neither always runs on
		// a cache the other warmed.
		for k := range 2 {
			start := time.Now()
			if (i+k)%2 == 0 {
				execTrue(b, s.shell)
				tExec = append(tExec, time.Since(start))
			} else {
				runTrue(b, s)
				tCorral = append(tCorral, time.Since(start))
			}
		}
		i++
	}
	r := float64(sum(tCorral)) / float64(sum(tExec))
	b.ReportMetric(r, "ratio")
	b.ReportMetric(float64(median(tCorral))/float64(median(tExec)), "median-ratio")
	b.ReportMetric(float64(sum(tExec).Microseconds())/float64(i), "exec-µs/op")
	b.ReportMetric(float64(sum(tCorral).Microseconds())/float64(i), "corral-µs/op")
	if r > overheadTarget {
		b.Logf("overhead %.3f× exceeds the %.2f× target", r, overheadTarget)
	}
}

func sum(d []time.Duration) time.Duration {
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return t
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// drainCommand is the flood both sides drain.
func drainCommand(n int64) string { return fmt.Sprintf("head -c %d /dev/zero", n) }

// execDrain is the baseline: plain os/exec with Stdout io.Discard
// (os/exec then copies a pipe into it from a goroutine).
func execDrain(b *testing.B, shell string, n int64) {
	cmd := exec.Command(shell, "-c", drainCommand(n))
	cmd.Stdout = io.Discard
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
}

// readDrain is a stronger baseline: a pipe read with the same 64 KiB buffer
// the supervisor uses (io.Discard's ReadFrom reads 8 KiB at a time).
func readDrain(b *testing.B, shell string, n int64) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(shell, "-c", drainCommand(n))
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, readChunk)
	var got int64
	for {
		k, err := r.Read(buf)
		got += int64(k)
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	if got != n {
		b.Fatalf("read %d bytes, want %d", got, n)
	}
}

// corralDrain drains the flood through Run and checks the count is exact.
func corralDrain(b *testing.B, s *Supervisor, n int64) {
	res, err := s.Run(context.Background(), Request{Command: drainCommand(n), Timeout: MaxTimeout})
	if err != nil {
		b.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 || res.StdoutInfo.TotalBytes != n {
		b.Fatalf("drain: exitCode %v signal %q, %d bytes, want 0 and %d", res.ExitCode, res.Signal, res.StdoutInfo.TotalBytes, n)
	}
}

// BenchmarkDrain measures throughput (b.SetBytes) of the two baselines and
// Run on `head -c 2G /dev/zero`, and in "ratio" alternates them in one loop
// and reports corral's throughput over each baseline's (target at least
// 0.95 against exec).
func BenchmarkDrain(b *testing.B) {
	n := drainBytes()
	s := benchSup(b, "")
	b.Run("exec", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			execDrain(b, s.shell, n)
		}
	})
	b.Run("read64k", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			readDrain(b, s.shell, n)
		}
	})
	b.Run("corral", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			corralDrain(b, s, n)
		}
	})
	b.Run("ratio", func(b *testing.B) {
		b.SetBytes(3 * n)
		var tExec, tRead, tCorral time.Duration
		var ratios []float64 // per iteration, whose three runs are neighbours in time
		i := 0
		for b.Loop() {
			var e, c time.Duration
			for k := range 3 {
				start := time.Now()
				switch (i + k) % 3 {
				case 0:
					execDrain(b, s.shell, n)
					e = time.Since(start)
					tExec += e
				case 1:
					readDrain(b, s.shell, n)
					tRead += time.Since(start)
				default:
					corralDrain(b, s, n)
					c = time.Since(start)
					tCorral += c
				}
			}
			ratios = append(ratios, float64(e)/float64(c))
			i++
		}
		// Throughput ratio = baseline time / corral time; the median of
		// the iterations' ratios is what a shared machine's load swings
		// (seconds long, as long as a few runs) move least.
		b.ReportMetric(float64(tExec)/float64(tCorral), "ratio")
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
		b.ReportMetric(float64(tRead)/float64(tCorral), "ratio-read64k")
		mbps := func(d time.Duration) float64 { return float64(n) * float64(i) / d.Seconds() / 1e6 }
		b.ReportMetric(mbps(tExec), "exec-MB/s")
		b.ReportMetric(mbps(tRead), "read64k-MB/s")
		b.ReportMetric(mbps(tCorral), "corral-MB/s")
		if r := float64(tExec) / float64(tCorral); r < drainTarget {
			b.Logf("drain throughput %.3f× of exec misses the %.2f× target", r, drainTarget)
		}
	})
}

// BenchmarkDrainPeakRSS runs a helper process that drains 4 GiB (256 MiB
// with -short) through its own Supervisor and reports its peak RSS, and the
// peak RSS of the same binary doing nothing (target: peak-MB at most 24).
func BenchmarkDrainPeakRSS(b *testing.B) {
	n := peakBytes()
	var peak, idle int64
	for b.Loop() {
		hwm, seen := runDrainHelper(b, n, "corral")
		if seen != n {
			b.Fatalf("helper drained %d bytes, want %d", seen, n)
		}
		peak = max(peak, hwm)
		hwm, _ = runDrainHelper(b, n, "idle")
		idle = max(idle, hwm)
	}
	b.ReportMetric(float64(peak)/1024, "peak-MB")
	b.ReportMetric(float64(idle)/1024, "idle-MB")
	if mb := float64(peak) / 1024; mb > peakRSSTarget {
		b.Logf("peak RSS %.1f MB exceeds the %d MB target", mb, peakRSSTarget)
	}
}

// runDrainHelper runs the drain-rss helper and returns its VmHWM in kB and
// the bytes it saw.
func runDrainHelper(b *testing.B, n int64, mode string) (hwm, seen int64) {
	argv, env := proctest.Argv("drain-rss", strconv.FormatInt(n, 10), mode)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("drain-rss %s: %v: %s", mode, err, stderr.Bytes())
	}
	if _, err := fmt.Sscanf(string(out), "%d %d", &hwm, &seen); err != nil {
		b.Fatalf("drain-rss %s: output %q: %v", mode, out, err)
	}
	return hwm, seen
}

// BenchmarkSessionStateRatio is the cost of session state tracking, in one
// loop on the default tier, each command run in a named session against the
// same command run statelessly:
//
//   - ratio, median-ratio: `true`, which cannot change the state
//     (shellstate.LeavesAlone): the session saves the state it started with. The
//     goal is 1.05×.
//   - reported-ratio: `cd .`, which could: the shell reports its state
//     (the start-up script, the EXIT trap, `export -p` into the memfd) and
//     corral parses and saves it.
func BenchmarkSessionStateRatio(b *testing.B) {
	s := newSup(b, Config{})
	var tPlain, tSession, tPlainCd, tSessionCd []time.Duration
	i := 0
	for b.Loop() {
		for k := range 4 {
			kind := (i + k) % 4
			req := Request{Command: "true"}
			if kind >= 2 {
				req.Command = "cd ."
			}
			if kind%2 == 1 {
				req.Session = "bench"
			}
			start := time.Now()
			res, err := s.Run(context.Background(), req)
			d := time.Since(start)
			if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
				b.Fatalf("%s: %v %+v", req.Command, err, res)
			}
			switch kind {
			case 0:
				tPlain = append(tPlain, d)
			case 1:
				tSession = append(tSession, d)
			case 2:
				tPlainCd = append(tPlainCd, d)
			case 3:
				tSessionCd = append(tSessionCd, d)
			}
		}
		i++
	}
	b.ReportMetric(float64(sum(tSession))/float64(sum(tPlain)), "ratio")
	b.ReportMetric(float64(median(tSession))/float64(median(tPlain)), "median-ratio")
	b.ReportMetric(float64(sum(tSessionCd))/float64(sum(tPlainCd)), "reported-ratio")
	b.ReportMetric(float64(sum(tPlain).Microseconds())/float64(i), "plain-µs/op")
	b.ReportMetric(float64(sum(tSession).Microseconds())/float64(i), "session-µs/op")
	b.ReportMetric(0, "ns/op")
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average %s", bytes.Fields(la)[0])
	}
}
