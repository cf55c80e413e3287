package journal

import (
	"os"
	"path/filepath"
	"runtime"
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

// BenchmarkVerify100k: verify of bigStore's store; cpu-ms is the CPU time of the walk (on a loaded machine
// the wall time is mostly waiting for a core).
func BenchmarkVerify100k(b *testing.B) {
	dir := bigStore(b)
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
