package killtree

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// growing is a bash tree that never stops forking: a loop that starts a
// sleep every 10 ms, and the same loop in a session of its own, which
// prints "ready" first (18 sleeps run by then).
func growing() string {
	sleep := proctest.Command("sleep", lifetime)
	loop := "while :; do " + sleep + " & sleep 0.01; done"
	return "for i in $(seq 18); do " + sleep + " & done; (setsid bash -c 'echo ready; " + loop + "' &); " + loop
}

// TestStopHaltsGrowth: on pgroup, Stop stops a tree that keeps forking (in
// its group and in a session of its own) before it counts it: the count stays
// the same while the tree would have grown, Terminate resumes and ends it,
// and Kill leaves nothing.
func TestStopHaltsGrowth(t *testing.T) {
	safety := proctest.Safe(t, 1000)
	entry, marker := proctest.Marker(t)
	defer proctest.NoSurvivors(t, marker, time.Second)
	m, err := New(Config{Tier: TierPgroup})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("bash", "-c", growing())
	cmd.Env = append(os.Environ(), entry)
	cmd.Stdout = w
	var tr *Tree
	err = safety.Run(func() (err error) { tr, err = m.Start(cmd); return err }) // pgroup: the tree forks in the safety cgroups
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	n, err := tr.Stop()
	if err != nil || n < 20 {
		t.Fatalf("Stop = %d, %v; want at least 20 members", n, err)
	}
	// A scan can miss a member that is being reparented (the kernel's
	// children files are imprecise while the tree changes), so Stop may
	// count one less than a later look; what must not happen is growth.
	first, err := tr.Members()
	if err != nil || first < n {
		t.Fatalf("Members after Stop = %d, %v; want at least Stop's %d", first, err, n)
	}
	time.Sleep(200 * time.Millisecond) // 20 forks' time for each loop, were it running
	if later, err := tr.Members(); err != nil || later != first {
		t.Errorf("Members 200 ms after Stop = %d, %v; want %d (the tree grew)", later, err, first)
	}
	if got, err := tr.Terminate(); err != nil || got != first {
		t.Errorf("Terminate = %d, %v; want %d", got, err, first)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.WaitEmpty(ctx); err != nil {
		t.Errorf("after Terminate: %v (the tree did not resume to take SIGTERM)", err)
	}
	if _, err := tr.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// TestWaitEmptyBounded: WaitEmpty returns with its context even while a
// pgroup tree of several hundred processes keeps forking (a scan in progress
// stops at the deadline instead of racing the growth to its end).
func TestWaitEmptyBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no 500-process trees")
	}
	safety := proctest.Safe(t, 3000)
	// The tree's hundreds of runnable processes would otherwise share the
	// CPU with this test process fairly: the bound measures WaitEmpty, not
	// how long the test waits for a core on 2 of them.
	safety.LowCPU()
	entry, marker := proctest.Marker(t)
	defer proctest.NoSurvivors(t, marker, time.Second)
	m, err := New(Config{Tier: TierPgroup})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// A bash tree of depth 8 (511 bash and 511 sleep processes) that
	// traps TERM, so nothing but Kill ends it.
	bomb := "trap '' TERM; echo ready; b() { if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; " +
		proctest.Command("sleep", lifetime) + "; }; b " + strconv.Itoa(8)
	cmd := exec.Command("bash", "-c", bomb)
	cmd.Env = append(os.Environ(), entry)
	cmd.Stdout = w
	var tr *Tree
	err = safety.Run(func() (err error) { tr, err = m.Start(cmd); return err }) // pgroup: the tree forks in the safety cgroups
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		err := tr.WaitEmpty(ctx)
		took := time.Since(start)
		cancel()
		if err == nil {
			t.Fatal("WaitEmpty: nil on a live tree")
		}
		// Unbounded, one scan of this tree under load took seconds; the
		// bound leaves room for a loaded machine's scheduling.
		if took > 1500*time.Millisecond {
			t.Errorf("WaitEmpty with a 100 ms context took %v", took)
		}
	}
	if _, err := tr.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}
