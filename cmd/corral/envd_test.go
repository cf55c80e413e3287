package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// envdAddr waits for the server's "serving envd" log line and returns the
// address it names.
func (s *server) envdAddr() string {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(s.logs.String(), "\n") {
			var l struct{ Message, Envd string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "serving envd" {
				return l.Envd
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("no \"serving envd\" line:\n%s", s.logs)
	return ""
}

func TestServeEnvdHealthAndExposure(t *testing.T) {
	t.Parallel()
	s := startServe(t, []string{"CORRAL_TOKEN="}, "--listen", "127.0.0.1:0", "--envd", "127.0.0.1:0")
	resp, err := http.Get("http://" + s.envdAddr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("GET /health: %d, want 204", resp.StatusCode)
	}
	// A token the operator gave is asked of envd clients, in X-Access-Token.
	ts := startServe(t, []string{"CORRAL_TOKEN=tok-envd"}, "--listen", "127.0.0.1:0", "--envd", "127.0.0.1:0")
	for _, tc := range []struct {
		token string
		want  int
	}{
		{"", http.StatusUnauthorized},                // none
		{"tok-envd", http.StatusOK},                  // the token
		{"Bearer tok-envd", http.StatusUnauthorized}, // not the bearer form
	} {
		req, _ := http.NewRequest("POST", "http://"+ts.envdAddr()+"/process.Process/List", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("X-Access-Token", tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("List with X-Access-Token %q: %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}
	// A generated token is not asked of envd clients (the SDKs in debug
	// mode send none), so the envd address must then be loopback.
	out, err := exec.Command(corralBinary(t), "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--envd", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--envd: refusing to listen on 0.0.0.0:0 without a token") {
		t.Errorf("--envd 0.0.0.0:0 with a generated token: %v\n%s", err, out)
	}
}

// TestEnvdE2BSDK drives `corral serve --envd` with the E2B JavaScript SDK
// (npm e2b 2.x, debug mode) installed into a temporary directory:
// commands.run, a failing command, onStdout, a background command killed
// with its setsid child, wait, sendStdin and closeStdin, commands.list (also
// of a process corral lists as waiting for input, with its own field), a
// timeout, and a flood (64 MiB; CORRAL_E2B_FLOOD_MIB=1024 for the 1 GB
// run) during which corral's peak RSS stays bounded. It skips when npm or
// the registry is unavailable, and in -short mode.
func TestEnvdE2BSDK(t *testing.T) {
	proctest.Heavy(t)
	t.Parallel()
	if testing.Short() {
		t.Skip("installs the e2b SDK with npm")
	}
	node, dir := e2bSDK(t)
	floodMiB := 64
	var err error
	if v := os.Getenv("CORRAL_E2B_FLOOD_MIB"); v != "" {
		if floodMiB, err = strconv.Atoi(v); err != nil || floodMiB < 1 {
			t.Fatalf("CORRAL_E2B_FLOOD_MIB=%q: want a positive number of MiB", v)
		}
	}
	begin := time.Now()
	script, err := os.ReadFile(filepath.Join("testdata", "e2b_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}

	// The SDK runs every command under `bash -l`: an empty HOME keeps the
	// login from sourcing this machine's profile (pyenv and the like).
	s := startServe(t, []string{"CORRAL_TOKEN=", "HOME=" + t.TempDir()}, "--listen", "127.0.0.1:0", "--envd", "127.0.0.1:0")
	t.Logf("corral serve up at %v", time.Since(begin).Round(time.Millisecond))
	markers := map[string]string{}
	for _, name := range []string{"plain", "kill", "timeout", "pty"} {
		_, markers[name] = proctest.Marker(t)
	}
	mj, _ := json.Marshal(markers)
	cmd := exec.Command(node, filepath.Join(dir, "client.mjs"), "http://"+s.envdAddr(), string(mj), strconv.Itoa(floodMiB))
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("node stderr:\n%s", stderr)
		}
	}()

	type step struct {
		Step      string
		Stdout    string
		Stderr    string
		ExitCode  *int
		ExitError bool
		Name      string
		Error     string
		Message   string
		Chunks    []string
		Pid       int
		Listed    []json.RawMessage
		Killed    bool
		Again     bool
		Ms        int64
		Size      int64
		Received  int64
		Skipped   int64
		First     bool
		Resized   bool
	}
	exit := func(st step) int {
		if st.ExitCode == nil {
			return -999
		}
		return *st.ExitCode
	}
	var seen []string
	var baseKB int64
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var st step
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			t.Fatalf("node printed %q: %v", sc.Text(), err)
		}
		seen = append(seen, st.Step)
		t.Logf("%s at %v", st.Step, time.Since(begin).Round(time.Millisecond))
		switch st.Step {
		case "echo":
			if st.Stdout != "hi\n" || exit(st) != 0 {
				t.Errorf("run('echo hi'): %s", sc.Text())
			}
		case "fail":
			if !st.ExitError || exit(st) != 3 || st.Stderr != "oops\n" {
				t.Errorf("a failing command: %s, want CommandExitError with exit code 3 and its stderr", sc.Text())
			}
		case "onStdout":
			if !slices.Equal(st.Chunks, []string{"line1\n", "line2\n", "line3\n"}) {
				t.Errorf("onStdout chunks %q, want one per line as they came", st.Chunks)
			}
		case "background":
			if len(st.Listed) != 1 {
				t.Errorf("commands.list() holds pid %d %d times, want once", st.Pid, len(st.Listed))
			}
			waitMarked(t, markers["kill"], 3) // bash, the setsid sleep, the sleep
			fmt.Fprintln(stdin, "go")
		case "kill":
			if left := proctest.Survivors(markers["kill"]); len(left) > 0 {
				t.Errorf("after handle.kill() returned: %v", left)
			}
			if !st.Killed || !st.ExitError || exit(st) != -1 || st.Again {
				t.Errorf("kill: %s, want killed, CommandExitError with exit code -1, then kill() false", sc.Text())
			}
		case "wait":
			if st.Stdout != "bg-done\n" {
				t.Errorf("background wait: %s", sc.Text())
			}
		case "sendStdin":
			if st.Stdout != "got hello\n" {
				t.Errorf("sendStdin: %s", sc.Text())
			}
		case "waiting":
			// corral's List says it waits (ProcessInfo.waiting, JSON
			// "waiting") before the SDK lists it.
			if w := envdWaiting(t, s.envdAddr(), st.Pid); w.Prompt != "name?" || w.Kind != "line" {
				t.Errorf("List's waiting for pid %d: %+v", st.Pid, w)
			}
			fmt.Fprintln(stdin, "go")
		case "listWaiting":
			if len(st.Listed) != 1 || st.Stdout != "name? got ann\n" {
				t.Errorf("commands.list() of a waiting process: %s", sc.Text())
			}
		case "closeStdin":
			if st.Stdout != "abc" {
				t.Errorf("closeStdin: %s", sc.Text())
			}
		case "pty":
			// sbx.pty: the size it asked for, the input typed, the resize
			// seen by stty, and kill ending the whole terminal's tree.
			if !st.First || !st.Resized || !strings.Contains(st.Stdout, "24 80") || !st.Killed {
				t.Errorf("pty: %s, want \"24 80\", pty-42, \"30 100\" after resize and killed", sc.Text())
			}
			proctest.NoSurvivors(t, markers["pty"], 3*time.Second)
			fmt.Fprintln(stdin, "go")
		case "timeout":
			if st.Ms > 10000 || (st.Name != "TimeoutError" && !st.ExitError) {
				t.Errorf("timeoutMs 1500: %s, want a TimeoutError or CommandExitError within seconds", sc.Text())
			}
			proctest.NoSurvivors(t, markers["timeout"], 3*time.Second)
			baseKB = s.hwmKB()
			fmt.Fprintln(stdin, "go")
		case "flood":
			peak := s.hwmKB()
			t.Logf("flood of %d MiB: the SDK received %d bytes, was told of %d skipped; corral's peak RSS %d kB before, %d kB after",
				floodMiB, st.Received, st.Skipped, baseKB, peak)
			if exit(st) != 0 || st.Received+st.Skipped != st.Size {
				t.Errorf("flood: %s, want exit 0 and every byte received or counted as skipped", sc.Text())
			}
			if grew := (peak - baseKB) << 10; grew > 32<<20 {
				t.Errorf("corral's peak RSS grew by %d MiB during the flood, want under 32 MiB", grew>>20)
			}
		}
	}
	want := []string{"echo", "fail", "onStdout", "background", "kill", "wait", "sendStdin", "waiting", "listWaiting", "closeStdin", "pty", "timeout", "flood"}
	if !slices.Equal(seen, want) {
		t.Errorf("steps %v, want %v", seen, want)
	}
	proctest.NoSurvivors(t, markers["plain"], time.Second)
}

// envdWaiting waits until envd's List (Connect JSON) says pid waits for
// input, and returns what it says.
func envdWaiting(t *testing.T, addr string, pid int) (w struct{ Prompt, Kind string }) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a bound on a loaded machine, not a speed
	for time.Now().Before(deadline) {
		resp, err := http.Post("http://"+addr+"/process.Process/List", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Processes []struct {
				Pid     int
				Waiting *struct{ Prompt, Kind string }
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Processes {
			if p.Pid == pid && p.Waiting != nil {
				return *p.Waiting
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("List never said pid %d waits", pid)
	return w
}

// waitMarked waits until n processes carry the marker.
func waitMarked(t *testing.T, marker string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second) // a bound on a loaded machine, not a speed
	for len(proctest.Survivors(marker)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d processes up, have %v", n, proctest.Survivors(marker))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// e2bSDK installs the e2b SDK (npm e2b 2.x) into a temporary directory and
// returns node's path and that directory. It skips the test where npm,
// Node 20.18.1 or later, or the registry is missing.
func e2bSDK(t *testing.T) (node, dir string) {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found; the E2B SDK test needs Node.js and npm")
	}
	node, err = exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	// e2b 2.x needs Node 20.18.1 or later (its undici); Debian's apt has 18.
	if v, err := exec.Command(node, "-e", `const [a, b, c] = process.versions.node.split(".").map(Number);
process.stdout.write(a > 20 || a === 20 && (b > 18 || b === 18 && c >= 1) ? "ok" : process.versions.node)`).Output(); err != nil || string(v) != "ok" {
		t.Skipf("node %s (%v): the e2b SDK needs Node 20.18.1 or later", v, err)
	}
	begin := time.Now()
	dir = t.TempDir()
	ictx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ictx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund",
		"--loglevel=error", "e2b@2").CombinedOutput()
	if err != nil {
		t.Skipf("npm install e2b failed (registry unavailable?): %v\n%s", err, out)
	}
	t.Logf("npm install took %v", time.Since(begin).Round(time.Millisecond))
	return node, dir
}
