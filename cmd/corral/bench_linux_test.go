package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The CLI against a plain process, whole process each time: one iteration
// execs the built corral binary and then its yardstick, in turn, so that
// the machine's drift during the run weighs on both alike. The figure is the
// ratio, reported with b.ReportMetric: the median of the per-pair ratios
// (one slow or lucky pair does not move it) and the ratio of the totals.
//
//	go test -run '^$' -bench 'BenchmarkRun' -benchtime 100x ./cmd/corral

// pairTimes collects the wall times of the pairs of one benchmark.
type pairTimes struct{ a, b []time.Duration }

// report reports each side's mean and the ratios a/b (a ratio "b/a" when
// inverse, for throughput: higher is better).
func (p *pairTimes) report(b *testing.B, nameA, nameB string, inverse bool) {
	var sa, sb time.Duration
	ratios := make([]float64, len(p.a))
	for i := range p.a {
		sa, sb = sa+p.a[i], sb+p.b[i]
		ratios[i] = float64(p.a[i]) / float64(p.b[i])
		if inverse {
			ratios[i] = 1 / ratios[i]
		}
	}
	slices.Sort(ratios)
	n := float64(len(p.a))
	total := float64(sa) / float64(sb)
	if inverse {
		total = 1 / total
	}
	b.ReportMetric(float64(sa.Microseconds())/n/1000, nameA+"-ms/op")
	b.ReportMetric(float64(sb.Microseconds())/n/1000, nameB+"-ms/op")
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
	b.ReportMetric(total, "total-ratio")
}

// timed runs cmd to the end and returns its wall time.
func timed(b *testing.B, cmd *exec.Cmd) time.Duration {
	b.Helper()
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%v: %v", cmd.Args, err)
	}
	return time.Since(t0)
}

// corralRun is the command `corral run -- command` with its own data
// directory (which holds the tier cache once the first run made it).
func corralRun(bin, dataDir, command string) *exec.Cmd {
	cmd := exec.Command(bin, "run", "--", command)
	cmd.Env = append(os.Environ(), "CORRAL_DATA_DIR="+dataDir)
	return cmd
}

// BenchmarkRunTrue: `corral run -- true` against `bash -c true`, for the
// binary `go build` makes here (cgo on where a C compiler is: os/user and
// net then link the C library, and each start runs the dynamic loader) and
// for the one deploy/Containerfile ships (CGO_ENABLED=0: static); floor is
// a Go program that does nothing but exit, against the same bash: one Go
// runtime start, which every corral start pays before its own code runs;
// floor-exec is a Go program that runs bash -c true with os/exec and
// waits: what any Go wrapper of the command pays, with no containment,
// watchdog or capture.
func BenchmarkRunTrue(b *testing.B) {
	dir := b.TempDir()
	bins := map[string]string{"default": corralBinary(b), "static": buildStatic(b, dir, "static", ".")}
	for _, name := range []string{"default", "static"} {
		b.Run("build="+name, func(b *testing.B) {
			data := b.TempDir()
			timed(b, corralRun(bins[name], data, "true")) // fills the tier cache, as any first run does
			var p pairTimes
			for b.Loop() {
				p.a = append(p.a, timed(b, corralRun(bins[name], data, "true")))
				p.b = append(p.b, timed(b, exec.Command("bash", "-c", "true")))
			}
			p.report(b, "corral", "bash", false)
		})
	}
	floors := []struct{ row, name, prog string }{
		{"floor", "go-exit", "package main\n\nimport \"os\"\n\nfunc main() { os.Exit(0) }\n"},
		{"floor-exec", "go-exec", "package main\n\nimport (\n\t\"os\"\n\t\"os/exec\"\n)\n\nfunc main() {\n\tif exec.Command(\"bash\", \"-c\", \"true\").Run() != nil {\n\t\tos.Exit(1)\n\t}\n}\n"},
	}
	for _, f := range floors {
		b.Run(f.row, func(b *testing.B) {
			src := filepath.Join(dir, f.name+".go")
			if err := os.WriteFile(src, []byte(f.prog), 0o644); err != nil {
				b.Fatal(err)
			}
			bin := buildStatic(b, dir, f.name, src)
			var p pairTimes
			for b.Loop() {
				p.a = append(p.a, timed(b, exec.Command(bin)))
				p.b = append(p.b, timed(b, exec.Command("bash", "-c", "true")))
			}
			p.report(b, f.name, "bash", false)
		})
	}
}

// buildStatic builds pkg (a directory or a file) with CGO_ENABLED=0 into
// dir/name and returns its path.
func buildStatic(b *testing.B, dir, name, pkg string) string {
	b.Helper()
	bin := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build %s (CGO_ENABLED=0): %v\n%s", pkg, err, out)
	}
	return bin
}

// BenchmarkRunDrain: `corral run` draining a 2 GiB flood (the live copy goes
// to /dev/null, the rest is drained and counted) against os/exec draining
// the same `bash -c` flood into io.Discard; the ratios are throughput, the
// os/exec drain's time over corral's (1 is par, higher is faster).
func BenchmarkRunDrain(b *testing.B) {
	if testing.Short() {
		b.Skip("a 2 GiB flood per iteration")
	}
	bin := corralBinary(b)
	data := b.TempDir()
	const flood = 2 << 30
	command := fmt.Sprintf("head -c %d /dev/zero", flood)
	timed(b, corralRun(bin, data, "true"))
	var p pairTimes
	for b.Loop() {
		p.a = append(p.a, timed(b, corralRun(bin, data, command)))
		plain := exec.Command("bash", "-c", command)
		plain.Stdout = io.Discard
		p.b = append(p.b, timed(b, plain))
	}
	p.report(b, "corral", "exec", true)
}
