package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerify100k: verify of a store of 1,000 sessions and 100,000
// entries of about 1 KiB (BENCH_ENTRIES to change the count), the restart
// budget's size; cpu-ms is the CPU time of the walk (on a loaded machine
// the wall time is mostly waiting for a core).
func BenchmarkVerify100k(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("BENCH_ENTRIES")); err == nil {
		n = v
	}
	dir := b.TempDir()
	j, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	sessions := make([]string, 1000)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("session-%d", i)
	}
	fill(b, j, sessions, n, sampleResult())
	j.Close()
	path := filepath.Join(dir, "journal", FileName)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	for b.Loop() {
		begin := threadCPU()
		err := verify(f, fi.Size())
		cpu += threadCPU() - begin
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms")
	b.ReportMetric(float64(fi.Size())/(1<<20), "store-MiB")
}
