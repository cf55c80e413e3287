package killtree

import (
	"bufio"
	"github.com/corral-sh/corral/killtree/internal/procfs"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
)

// onOtherThread runs f on an OS thread other than the main one and waits.
func onOtherThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if unix.Gettid() != os.Getpid() {
			f()
			close(done)
			return
		}
		// This goroutine holds the main thread; another one cannot.
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			f()
			close(done)
		}()
		<-done
	}()
	<-done
}

// TestOrphanOfNonMainThread: scanDescendants reads this process's children
// from the main thread only. A leader forked by another thread leaves an
// orphan when it exits; the kernel hands the orphan to the main thread (the
// first living thread of the subreaper), so the pgroup tier still counts it
// and kills it. If the kernel handed it to the forking thread instead, the
// tree would look empty and the orphan would survive.
func TestOrphanOfNonMainThread(t *testing.T) {
	m, err := New(Config{Tier: TierPgroup})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	entry, marker := proctest.Marker(t)
	cmd := exec.Command("bash", "-c", "setsid env "+proctest.Command("sleep", lifetime)+" & echo $!")
	cmd.Env = append(os.Environ(), entry)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var tr *Tree
	var forker int
	onOtherThread(func() {
		forker = unix.Gettid()
		tr, err = m.Start(cmd)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if forker == os.Getpid() {
		t.Fatal("the leader was forked by the main thread")
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("bash said %q", line)
	}
	<-tr.Exited()

	// The kernel's side of the bargain: the orphan hangs under the main thread.
	main := "/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(procfs.ParsePids([]byte(readFileOr(main))), orphan) {
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d not among the main thread's children %q", orphan, readFileOr(main))
		}
		time.Sleep(time.Millisecond) // polling the reparenting, which follows the leader's exit
	}
	if n, err := tr.Members(); err != nil || n != 1 {
		t.Errorf("Members = %d, %v; want the orphan", n, err)
	}
	rep, err := tr.Kill()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Processes != 1 {
		t.Errorf("Kill killed %d processes, want 1", rep.Processes)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	proctest.NoSurvivors(t, marker, time.Second)
}

// TestOwnedElsewhereAfterReap: a leader's entry in ownChildren keeps other
// trees off its PID only until the leader is reaped; after that the PID may
// belong to any process, which trees may claim and reap again.
func TestOwnedElsewhereAfterReap(t *testing.T) {
	cmd := exec.Command(trueBinary())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	const key = 1 << 30 // no real PID: the entry stands for a recycled one
	ownChildren.Store(key, f)
	defer ownChildren.Delete(key)
	if !ownedElsewhere(key) {
		t.Error("the entry of a leader not yet reaped does not keep trees off")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if ownedElsewhere(key) {
		t.Error("the entry of a reaped leader still keeps trees off its (recycled) PID")
	}
	f.Close()
	if ownedElsewhere(key) {
		t.Error("the entry of a closed tree still keeps trees off")
	}
	ownChildren.Store(key, struct{}{}) // a watchdog's
	if !ownedElsewhere(key) {
		t.Error("a watchdog's entry does not keep trees off")
	}
}

// TestOwnChildrenRead: the kept-open children list reads the same PIDs as
// opening it by path, also past the 4 KiB a single seq_file read returns
// (800 orphans of an exited shell, reparented to this subreaper's main
// thread, are some 5 KB of text).
func TestOwnChildrenRead(t *testing.T) {
	proctest.Heavy(t)
	m, err := New(Config{Tier: TierPgroup})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	entry, marker := proctest.Marker(t)
	defer proctest.NoSurvivors(t, marker, time.Second)
	cmd := exec.Command("bash", "-c", "for i in $(seq 800); do sleep "+lifetime+" & done")
	cmd.Env = append(os.Environ(), entry)
	tr, err := m.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	<-tr.Exited()
	defer cmd.Wait()
	defer tr.Kill()
	own := m.plat.own
	if own == nil {
		t.Skip("no /proc/<pid>/task/<tid>/children here")
	}
	byPath := func() []int {
		b, err := procfs.ReadFile(own.Path(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return procfs.ParsePids(b)
	}
	// The orphans are reparented one by one as the shell exits: read until
	// both ways agree on a list that holds all of them.
	deadline := time.Now().Add(5 * time.Second)
	for {
		want := byPath()
		b, err := own.ReadAll(make([]byte, 64))
		if err != nil {
			t.Fatal(err)
		}
		got := procfs.ParsePids(b)
		slices.Sort(want)
		slices.Sort(got)
		if len(want) >= 800 && slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept-open read has %d PIDs, by path %d (want ≥ 800 and equal)", len(got), len(want))
		}
		time.Sleep(5 * time.Millisecond) // polling the reparenting
	}
	rep, err := tr.Kill()
	if err != nil || rep.Processes < 800 {
		t.Fatalf("Kill = %+v, %v; want ≥ 800 processes", rep, err)
	}
}
