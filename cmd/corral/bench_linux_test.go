package main

import (
	"errors"
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
// for the one deploy/Containerfile ships (CGO_ENABLED=0: static). The other
// rows say where that time goes, each against the same bash:
//   - start=static: `corral version`, the static binary's start, package
//     initialisation and exit, and no command;
//   - floor: a Go program that does nothing but exit, one Go runtime start;
//   - floor-exec: a Go program that runs bash -c true with os/exec and
//     waits: what any Go wrapper of the command pays, with no containment,
//     watchdog or capture;
//   - floor-contained (testdata/floor/contained.go): floor-exec plus the
//     kernel's part of corral's promise, done the cheapest way a Go program
//     can: a watchdog re-executed and killed, a cgroup made where corral's
//     tier makes its containment here, bash cloned into it, the cgroup
//     removed; floor-cgroup is the same without the watchdog. Both need
//     root or a delegated cgroup; without them they are skipped.
func BenchmarkRunTrue(b *testing.B) {
	dir := b.TempDir()
	static := buildStatic(b, dir, "static", ".")
	srcs := map[string]string{
		"go-exit": "package main\n\nimport \"os\"\n\nfunc main() { os.Exit(0) }\n",
		"go-exec": "package main\n\nimport (\n\t\"os\"\n\t\"os/exec\"\n)\n\nfunc main() {\n\tif exec.Command(\"bash\", \"-c\", \"true\").Run() != nil {\n\t\tos.Exit(1)\n\t}\n}\n",
	}
	built := map[string]string{}
	floor := func(name string) string {
		if bin, ok := built[name]; ok {
			return bin
		}
		src, err := filepath.Abs(filepath.Join("testdata", "floor", "contained.go"))
		if err != nil {
			b.Fatal(err)
		}
		if prog, ok := srcs[name]; ok {
			src = filepath.Join(dir, name+".go")
			if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		built[name] = buildStatic(b, dir, name, src)
		return built[name]
	}
	data := b.TempDir()
	rows := []struct {
		row, name string
		cmd       func() *exec.Cmd
	}{
		{"build=default", "corral", func() *exec.Cmd { return corralRun(corralBinary(b), data, "true") }},
		{"build=static", "corral", func() *exec.Cmd { return corralRun(static, data, "true") }},
		{"start=static", "corral-version", func() *exec.Cmd { return exec.Command(static, "version") }},
		{"floor", "go-exit", func() *exec.Cmd { return exec.Command(floor("go-exit")) }},
		{"floor-exec", "go-exec", func() *exec.Cmd { return exec.Command(floor("go-exec")) }},
		{"floor-cgroup", "go-cgroup", func() *exec.Cmd { return exec.Command(floor("go-contained"), "-no-watchdog") }},
		{"floor-contained", "go-contained", func() *exec.Cmd { return exec.Command(floor("go-contained")) }},
	}
	for _, r := range rows {
		b.Run(r.row, func(b *testing.B) {
			first := r.cmd() // builds what the row runs; a corral run fills the tier cache, as any first run does
			if out, err := first.CombinedOutput(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) && ee.ExitCode() == 3 && r.name != "corral" {
					b.Skipf("%v: %s", first.Args, out) // contained.go without root or a delegated cgroup
				}
				b.Fatalf("%v: %v: %s", first.Args, err, out)
			}
			var p pairTimes
			for b.Loop() {
				cmd := exec.Command(first.Path, first.Args[1:]...)
				cmd.Env = first.Env
				p.a = append(p.a, timed(b, cmd))
				p.b = append(p.b, timed(b, exec.Command("bash", "-c", "true")))
			}
			p.report(b, r.name, "bash", false)
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
