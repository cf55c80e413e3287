package killtree

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
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
