//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/supervisor"
)

// get fetches path and returns the status and the body.
func (s *server) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	resp, err := s.client.Do(s.request(ctx, http.MethodGet, path, nil))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, b
}

// TestServeRestartJournal SIGKILLs `corral serve` while four commands of a
// session run (escaping trees) and starts it again on the same data
// directory: the finished entries read back byte for byte, the running
// ones are completed as interrupted, no process of the old trees is alive,
// and the session resumes in its journaled working directory.
func TestServeRestartJournal(t *testing.T) {
	warmUp(t)
	check := processOracles(t)
	defer check()
	data := t.TempDir()
	work, _ := filepath.EvalSymlinks(t.TempDir())
	srv := startServer(t, "--data-dir", data)

	// Finished commands, read back before the kill.
	var done []supervisor.Result
	for _, cmd := range []string{"echo one", "cd " + work + " && export GONE=1", "echo '<three>' >&2; exit 3"} {
		done = append(done, srv.exec(t, api.ExecRequest{Session: "rs", Command: cmd}))
	}
	before := map[string][]byte{}
	for _, r := range done {
		code, b := srv.get(t, "/v1/sessions/rs/results/"+r.ID)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", r.ID, code, b)
		}
		before[r.ID] = b
	}

	// A second server on the same data directory fails at once.
	begin := time.Now()
	second := exec.Command(corralBin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data)
	second.Env = append(os.Environ(), "CORRAL_TOKEN=x")
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "locked") || !strings.Contains(string(out), filepath.Join(data, "journal", journal.FileName)) {
		t.Fatalf("a second serve on the data directory: %v\n%s", err, out)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("the second serve took %v to fail", d)
	}

	// Commands running at the kill.
	m := marker(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 4 {
		resp, dec := srv.stream(t, ctx, api.ExecRequest{Session: "rs", Command: escapingTree(), Env: map[string]string{proctest.MarkerEnv: m}})
		defer resp.Body.Close()
		waitOutput(t, dec, "go\n")
	}
	adopted := descendants(srv.pid())
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Wait()
	// TestServeKilled holds the watchdog to its second; here the point is
	// that nothing of the old trees is alive when the new server serves,
	// so the bound leaves room for a machine under heavy load (a run at a
	// load average of 170 took 7 s).
	checkGoneWithin(t, m, 15*time.Second)
	reapAdopted(t, adopted)

	srv2 := startServer(t, "--data-dir", data)
	for id, b := range before {
		if code, after := srv2.get(t, "/v1/sessions/rs/results/"+id); code != 200 || !bytes.Equal(after, b) {
			t.Errorf("entry %s after the restart: %d\n%s\nwas\n%s", id, code, after, b)
		}
	}
	code, b := srv2.get(t, "/v1/sessions/rs/results?after=3")
	var page struct {
		Entries []journal.Entry `json:"entries"`
		Next    uint64          `json:"next"`
	}
	if code != 200 || json.Unmarshal(b, &page) != nil || len(page.Entries) != 4 || page.Next != 7 {
		t.Fatalf("entries after the restart: %d %s", code, b)
	}
	for _, e := range page.Entries {
		res := decodeResult(t, e.Result)
		if !res.Interrupted || !res.Aborted || res.ID != e.ID || e.EndedAt == nil || !strings.Contains(res.Stderr, "never recorded") {
			t.Errorf("entry %d: %s", e.Seq, e.Result)
		}
	}
	// The session resumes in its directory, without its variables.
	res := srv2.exec(t, api.ExecRequest{Session: "rs", Command: `pwd; echo "GONE=$GONE"`})
	if res.Stdout != work+"\nGONE=\n" || !strings.Contains(res.Stderr, "reset to the server's environment") {
		t.Errorf("after the restart: %q %q", res.Stdout, res.Stderr)
	}
	if code, b := srv2.get(t, "/v1/sessions/rs"); code != 200 || !strings.Contains(string(b), `"results":8`) {
		t.Errorf("GET /v1/sessions/rs: %d %s", code, b)
	}
	srv2.stop(t) // before the descriptor oracle
}

// TestServeDamagedJournal: corral serve refuses a journal file cut in half
// or of random bytes, naming the file and how to move it aside.
func TestServeDamagedJournal(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"half", "random"} {
		t.Run(damage, func(t *testing.T) {
			data := t.TempDir()
			j, err := journal.Open(data, journal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				st, _ := j.Start("s", "x", time.Now())
				j.Finish(st, time.Now(), json.RawMessage(`"`+strings.Repeat("y", 2000*i)+`"`), "")
			}
			j.Close()
			path := filepath.Join(data, "journal", journal.FileName)
			b, _ := os.ReadFile(path)
			if damage == "half" {
				b = b[:len(b)/2]
			} else {
				for i := range b {
					b[i] = byte(i*131 + 7)
				}
			}
			os.WriteFile(path, b, 0o600)
			cmd := exec.Command(corralBin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data)
			cmd.Env = append(os.Environ(), "CORRAL_TOKEN=x")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "mv "+path+" "+path+".corrupt") {
				t.Fatalf("serve on a damaged journal: %v\n%s", err, out)
			}
		})
	}
}
