//go:build linux

package benchkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FloodCommand is the flood every contender drains: n zero bytes on stdout.
func FloodCommand(n int64) string { return fmt.Sprintf("head -c %d /dev/zero", n) }

// Flood sizes of the performance figures (docs/performance.md).
const (
	ThroughputBytes = 2 << 30 // the throughput flood: 2 GiB
	PeakRSSBytes    = 4 << 30 // the peak-RSS flood: 4 GiB
	// BufferedMax caps the flood for contenders that keep all output in
	// memory (os/exec with a bytes.Buffer, go-cmd's buffered mode): their
	// peak RSS is about four times the output (buffer doubling plus GC
	// headroom), so 4 GiB would take some 16 GiB on a shared machine. Their
	// figures say which size was measured (the flood-MiB metric).
	BufferedMax = 1 << 30
)

// FloodSize is the flood a contender is measured with: n, or BufferedMax
// for a contender that buffers everything.
func FloodSize(n int64, buffers bool) int64 {
	if buffers {
		return min(n, BufferedMax)
	}
	return n
}

// TreePlain and TreeSetsid are the two halves of the kill-latency tree:
// TreeProcs processes in all with the shell, half of them escaped into
// sessions of their own.
const (
	TreePlain  = 500
	TreeSetsid = 499
	TreeProcs  = 1 + TreePlain + TreeSetsid
)

// TreeCommand starts TreePlain background sleeps and TreeSetsid setsid'd
// ones, then waits: a 1,000-process tree (the shell included) whose setsid
// members a process-group kill misses.
var TreeCommand = fmt.Sprintf(
	"for i in $(seq %d); do sleep 1000 & done; for i in $(seq %d); do setsid sleep 1000 & done; wait",
	TreePlain, TreeSetsid)

// HungAfter bounds how long a kill-latency helper waits for a contender's
// call to return after the stop; a call still blocked then is reported as
// hung (its latency as HungAfter).
const HungAfter = 5 * time.Second

// VmHWM returns the peak resident set size of process pid ("self" for the
// caller) in kB.
func VmHWM(pid string) (int64, error) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0, fmt.Errorf("benchkit: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, errors.New("benchkit: no VmHWM in /proc/" + pid + "/status")
}

// Shell is the shell every contender runs commands with: bash from PATH, as
// corral does.
func Shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "sh"
}

// A Runner runs command to the end the way one contender does and returns
// when its call returns.
type Runner func(command string) error

// A Starter starts command with the extra environment entries env the way
// one contender does. stop ends it the way that contender would (cancel a
// context, call Stop); done is closed when the contender's call returned.
type Starter func(command string, env []string) (stop func(), done <-chan struct{}, err error)

// ReportFlood records the flood size a figure was measured with.
func ReportFlood(b *testing.B, n int64) { b.ReportMetric(float64(n>>20), "flood-MiB") }

// RSSHelper is the body of a peak-RSS helper process: args are
// "<bytes>"; it runs the flood with run (nil: nothing, the idle floor) and
// prints its own VmHWM in kB.
func RSSHelper(run Runner, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "benchkit: usage: rss <bytes>")
		return 2
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchkit:", err)
		return 2
	}
	if run != nil {
		if err := run(FloodCommand(n)); err != nil {
			fmt.Fprintln(os.Stderr, "benchkit:", err)
			return 1
		}
	}
	kb, err := VmHWM("self")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(kb)
	return 0
}

// KillHelper is the body of a kill-latency helper process: args are
// "<marker entry>" (NAME=value). It starts TreeCommand with start and the
// marker, waits until TreeProcs processes carry the marker, stops it, and
// prints "<ms from stop to return> <returned 0|1>".
func KillHelper(start Starter, count func() int, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "benchkit: usage: kill <marker entry>")
		return 2
	}
	stop, done, err := start(TreeCommand, []string{args[0]})
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchkit:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for count() < TreeProcs {
		select {
		case <-ctx.Done():
			fmt.Fprintf(os.Stderr, "benchkit: the tree reached %d of %d processes\n", count(), TreeProcs)
			return 1
		case <-time.After(10 * time.Millisecond):
		}
	}
	t0 := time.Now()
	stop()
	returned := 1
	select {
	case <-done:
	case <-time.After(HungAfter):
		returned = 0
	}
	fmt.Printf("%d %d\n", time.Since(t0).Milliseconds(), returned)
	return 0
}
