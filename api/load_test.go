package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

func TestLoad(t *testing.T) {
	proctest.Heavy(t)
	if testing.Short() {
		t.Skip("200 concurrent commands of 50 MiB each")
	}
	const n = 200
	// Each command prints 50 MiB (about 25 s for all 200 on 2 cores), or
	// 5 MiB under the race detector, which makes the drain several times
	// slower.
	loadBytes := int64(50 << 20)
	if raceEnabled {
		loadBytes = 5 << 20
	}
	e := newEnv(t, withMaxConcurrent(n))
	// One warm-up request opens what the server keeps open (the
	// listener's accepted connection pool, the cgroup root, the sessions'
	// shared start script, a memfd made on a session's first command) before
	// the count. CI once counted that memfd as a leak: the warm-up had no
	// session.
	e.exec(`{"command":"true","session":"load"}`)
	e.client.Transport.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	fds := proctest.FDCount(t)
	rss0 := statusKB(t, "VmRSS")

	body := fmt.Sprintf(`{"command":"yes | head -c %d","session":"load","timeout":300}`, loadBytes)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, b := e.do(context.Background(), "POST", "/v1/exec", body)
			var res supervisor.Result
			if err := json.Unmarshal(b, &res); err != nil || code != 200 {
				errs <- fmt.Errorf("request %d: status %d %v: %.200s", i, code, err, b)
				return
			}
			info := res.StdoutInfo
			if res.ExitCode == nil || *res.ExitCode != 0 || info.TotalBytes != loadBytes || info.TotalLines != loadBytes/2 ||
				!info.Truncated || info.KeptLines != 4000 || !strings.HasPrefix(res.Stdout, "y\ny\n") || info.SpillPath == "" {
				errs <- fmt.Errorf("request %d: wrong result: exit %v %+v", i, res.ExitCode, info)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.client.Transport.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	hwm := statusKB(t, "VmHWM")
	t.Logf("RSS before %d MiB, peak %d MiB (test client and server in one process)", rss0>>10, hwm>>10)
	// Each command keeps at most 512 KiB of stdout and a stderr ring, plus
	// its live events when streaming; 200 of them fit well in 512 MiB
	// (measured: about 250 MiB, against 10 GiB of output). The race
	// detector's shadow memory multiplies that (measured: about 950 MiB).
	limit := int64(512 << 10)
	if raceEnabled {
		limit = 2 << 20
	}
	if hwm-rss0 > limit {
		t.Errorf("peak RSS grew by %d MiB", (hwm-rss0)>>10)
	}
	// The server's connections close asynchronously after the client's
	// (under -race and a loaded machine, CI once took more than 10 s); a
	// descriptor that stays open is named.
	deadline := time.Now().Add(30 * time.Second)
	for proctest.FDCount(t) > fds {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open 30 s after the load, %d before it: %s", proctest.FDCount(t), fds, openFDs())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// openFDs lists this process's descriptors and what they point to.
func openFDs() string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Fprintf(&b, "%s→%s ", e.Name(), target)
	}
	return b.String()
}

// statusKB reads a "kB" field of /proc/self/status.
func statusKB(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
