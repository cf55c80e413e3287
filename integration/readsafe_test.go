//go:build linux

package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
)

// startSafeServer starts `corral serve` on dataDir inside a safety cgroup
// (pids.max pids) with at most nofile descriptors, like startServer.
func startSafeServer(t *testing.T, dataDir string, pids int, nofile uint64) *server {
	t.Helper()
	safe := proctest.Safe(t, pids)
	var b [16]byte
	rand.Read(b[:])
	s := &server{token: hex.EncodeToString(b[:]), logs: make(chan struct{})}
	s.cmd = exec.Command(corralBin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	s.cmd.Env = append(os.Environ(), "CORRAL_TOKEN="+s.token, "CORRAL_CONTAINMENT=")
	logs, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := safe.Start(s.cmd); err != nil {
		t.Fatalf("start corral serve: %v", err)
	}
	lim := unix.Rlimit{Cur: nofile, Max: nofile}
	if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		t.Fatalf("prlimit: %v", err)
	}
	addr := make(chan string, 1)
	go s.readLogs(logs, addr)
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.logs:
		s.cmd.Wait()
		t.Fatal("corral serve exited before serving")
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		s.cmd.Wait()
		t.Fatal("corral serve did not log its address within 30 s")
	}
	s.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(func() { s.stop(t) })
	return s
}

// procCounts returns the threads and open descriptors of process pid.
func procCounts(t *testing.T, pid int) (threads, fds int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return threads, len(ents)
}

// post sends body to path and returns the status and the body read.
func (s *server) post(ctx context.Context, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestReadAttacks: against a server in a safety cgroup with 256
// descriptors, 2,000 reads and greps of a FIFO planted in a session
// directory and of paths through a session directory swapped for a
// symlink to / each get a prompt 404 and never host content, while a
// well-behaved client keeps getting its commands run; the server's threads
// and descriptors come back to their baseline.
func TestReadAttacks(t *testing.T) {
	data := t.TempDir()
	s := startSafeServer(t, data, 512, 256)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The attacks: a FIFO under a spill name, a session dir replaced by a
	// symlink to / from inside a command, a symlink as a spill file.
	res := s.exec(t, api.ExecRequest{Command: "seq 100000", Session: "victim"})
	name := filepath.Base(res.StdoutInfo.SpillPath)
	sess := filepath.Join(data, "scratch", "victim")
	planted := filepath.Join(data, "scratch", "planted", "tool-output")
	s.exec(t, api.ExecRequest{Command: fmt.Sprintf("rm -rf %[1]q && ln -s / %[1]q && mkdir -p %[2]q && mkfifo %[2]q/fifo.log && ln -s /etc/passwd %[2]q/%[3]s", sess, planted, name)})
	paths := []string{
		filepath.Join(planted, "fifo.log"),
		filepath.Join(sess, "etc", "passwd"),
		filepath.Join(sess, "tool-output", name),
		filepath.Join(planted, name),
		"scratch/victim/../../../../etc/passwd",
	}
	s.exec(t, api.ExecRequest{Command: "true"}) // warm up
	s.client.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	threads0, fds0 := procCounts(t, s.pid())

	// The well-behaved client runs a command every 100 ms meanwhile.
	var good, slow atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			start := time.Now()
			code, body, err := s.post(ctx, "/v1/exec", `{"command":"echo ok"}`)
			if err != nil || code != 200 || !strings.Contains(body, `"stdout":"ok\n"`) {
				t.Errorf("well-behaved exec during the attack: %d %v %.200s", code, err, body)
				continue
			}
			good.Add(1)
			if time.Since(start) > 5*time.Second {
				slow.Add(1)
			}
		}
	})

	const attacks, workers = 2000, 50
	var next, done atomic.Int64
	start := time.Now()
	var attackers sync.WaitGroup
	for range workers {
		attackers.Go(func() {
			for {
				i := next.Add(1) - 1
				// At least the attacks asked for, and on until the
				// well-behaved client was answered three times while they
				// ran (2,000 attacks can take less than its 100 ms pace).
				if i >= attacks && (good.Load() >= 3 || ctx.Err() != nil) {
					return
				}
				p := paths[i%int64(len(paths))]
				ep, body := "/v1/read", `{"path":`+strconv.Quote(p)+`}`
				if i%2 == 1 {
					ep, body = "/v1/grep", `{"path":`+strconv.Quote(p)+`,"pattern":"root"}`
				}
				code, b, err := s.post(ctx, ep, body)
				done.Add(1)
				if err != nil || code != 404 || strings.Contains(b, "root:") {
					t.Errorf("%s %s: %d %v %.200s", ep, p, code, err, b)
				}
			}
		})
	}
	attackers.Wait()
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if good.Load() < 3 || slow.Load() > 0 {
		t.Errorf("well-behaved client: %d answers, %d slower than 5 s", good.Load(), slow.Load())
	}

	s.client.CloseIdleConnections()
	deadline := time.Now().Add(15 * time.Second)
	for {
		threads, fds := procCounts(t, s.pid())
		if fds <= fds0+2 && threads <= threads0+20 {
			t.Logf("%d attacks in %v (%d workers); well-behaved execs answered: %d; threads %d -> %d, fds %d -> %d",
				done.Load(), took, workers, good.Load(), threads0, threads, fds0, fds)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the attacks: threads %d (baseline %d), fds %d (baseline %d)", threads, threads0, fds, fds0)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
