package killtree

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPids: Pids lists the tree's live processes on every tier, the
// leader and a child it started; once the tree is killed, none.
func TestPids(t *testing.T) {
	t.Parallel()
	for _, st := range Doctor(Config{}) {
		if !st.Works {
			continue
		}
		t.Run(string(st.Tier), func(t *testing.T) {
			t.Parallel()
			m, err := New(Config{Tier: st.Tier})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cmd := exec.Command("bash", "-c", "sleep 30 & echo $!; wait")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			tr, err := m.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			var child int
			var buf [32]byte
			n, _ := out.Read(buf[:])
			for _, c := range buf[:n] {
				if '0' <= c && c <= '9' {
					child = child*10 + int(c-'0')
				}
			}
			var pids []int
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if pids, err = tr.Pids(context.Background()); err == nil && slices.Contains(pids, tr.Pid()) && slices.Contains(pids, child) {
					break
				}
				time.Sleep(10 * time.Millisecond) // polling a condition
			}
			if !slices.Contains(pids, tr.Pid()) || !slices.Contains(pids, child) {
				t.Errorf("Pids %v (%v), want the leader %d and the child %d", pids, err, tr.Pid(), child)
			}
			if _, err := tr.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if pids, err := tr.Pids(context.Background()); err != nil || len(pids) != 0 {
				t.Errorf("Pids after the kill: %v %v", pids, err)
			}
			tr.Close()
		})
	}
}

// TestKillTerminalHolders: a pseudo-terminal's master given to WatchPipes
// stands for its slave: a process holding the slave (here one started
// outside the tree, as an escapee would be) is killed and counted.
func TestKillTerminalHolders(t *testing.T) {
	t.Parallel()
	m, err := New(Config{Tier: TierPgroup})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(master, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "30")
	holder.Stdin = slave
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	done := make(chan error, 1)
	go func() { done <- holder.Wait() }()
	cmd := exec.Command("true")
	tr, err := m.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		tr.Kill()
		cmd.Wait() // the leader is ours to reap
		tr.Close()
	}()
	tr.WatchPipes(master)
	killed, err := tr.KillPipeHolders()
	if err != nil || killed != 1 {
		t.Errorf("KillPipeHolders: %d, %v; want the slave's holder", killed, err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("the holder exited by itself")
		}
	case <-time.After(10 * time.Second):
		holder.Process.Kill()
		t.Error("the slave's holder is still alive")
	}
}
