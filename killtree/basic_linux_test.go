package killtree

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// startBash starts `bash -c script` in m with a marker and stdout on a pipe.
func startBash(t *testing.T, m *Manager, script string) (*Tree, *exec.Cmd, *os.File, string) {
	t.Helper()
	entry, marker := proctest.Marker(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), entry)
	cmd.Stdout, cmd.Stderr = w, w
	tr, err := m.Start(cmd)
	w.Close()
	if err != nil {
		r.Close()
		t.Fatalf("Start: %v", err)
	}
	tr.WatchPipes(r)
	return tr, cmd, r, marker
}

func TestPgroupBasic(t *testing.T) {
	for _, tier := range []Tier{TierPgroup, TierCgroup2, TierCgroup1} {
		t.Run(string(tier), func(t *testing.T) {
			m, err := New(Config{Tier: tier})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			fds := proctest.FDCount(t)
			tr, cmd, r, marker := startBash(t, m, proctest.Command("escaper", "20")+"; echo done; sleep 100")
			line, err := bufio.NewReader(r).ReadString('\n')
			t.Logf("first line %q err %v", line, err)
			n, err := tr.Members()
			t.Logf("members %d err %v", n, err)
			rep, err := tr.Kill()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("report %+v", rep)
			werr := cmd.Wait()
			t.Logf("wait: %v", werr)
			r.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 1<<16)
			for {
				if _, err := r.Read(buf); err != nil {
					t.Logf("read end: %v", err)
					break
				}
			}
			r.Close()
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			proctest.NoSurvivors(t, marker, 0)
			if z := proctest.Zombies(os.Getpid()); len(z) > 0 {
				t.Errorf("zombies: %v", z)
			}
			if got := proctest.FDCount(t); got != fds {
				t.Errorf("fds %d, want %d", got, fds)
			}
		})
	}
}
