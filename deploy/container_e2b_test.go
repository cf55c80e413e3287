package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// e2bSDK installs the e2b SDK (npm e2b 2.x) into a temporary directory,
// once per test binary, and returns node's path and that directory; where
// npm, Node 20.18.1 or later, or the registry is missing: setupFailed.
func e2bSDK(t *testing.T) (node, dir string) {
	t.Helper()
	sdk.once.Do(installE2B)
	if sdk.err != nil {
		setupFailed(t, "%v", sdk.err)
	}
	return sdk.node, sdk.dir
}

var sdk struct {
	once      sync.Once
	node, dir string
	err       error
}

func installE2B() {
	npm, err := exec.LookPath("npm")
	if err != nil {
		sdk.err = fmt.Errorf("npm not found; the E2B SDK needs Node.js and npm")
		return
	}
	if sdk.node, err = exec.LookPath("node"); err != nil {
		sdk.err = fmt.Errorf("node not found")
		return
	}
	// e2b 2.x needs Node 20.18.1 or later (its undici).
	if v, err := exec.Command(sdk.node, "-e", `const [a, b, c] = process.versions.node.split(".").map(Number);
process.stdout.write(a > 20 || a === 20 && (b > 18 || b === 18 && c >= 1) ? "ok" : process.versions.node)`).Output(); err != nil || string(v) != "ok" {
		sdk.err = fmt.Errorf("node %s (%v): the e2b SDK needs Node 20.18.1 or later", v, err)
		return
	}
	if sdk.dir, err = os.MkdirTemp(tmpRoot, "e2b-"); err != nil {
		sdk.err = err
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, npm, "install", "--prefix", sdk.dir, "--no-audit", "--no-fund",
		"--loglevel=error", "e2b@2").CombinedOutput(); err != nil {
		sdk.err = fmt.Errorf("npm install e2b failed (registry unavailable?): %v\n%s", err, out)
		return
	}
	// The scripts are cmd/corral's, which drive corral serve --envd outside
	// a container; they import e2b from the directory they lie in.
	for _, f := range []string{"e2b_client.mjs", "e2b_files.mjs"} {
		b, err := os.ReadFile(filepath.Join("..", "cmd", "corral", "testdata", f))
		if err == nil {
			err = os.WriteFile(filepath.Join(sdk.dir, f), b, 0o644)
		}
		if err != nil {
			sdk.err = err
			return
		}
	}
}

// withEnvMarker lists the host's processes whose environment holds
// CORRAL_TEST_MARKER=marker (the e2b scripts mark their commands so).
func withEnvMarker(marker string) []string {
	var out []string
	want := []byte("CORRAL_TEST_MARKER=" + marker + "\x00")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(b), string(want)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// waitEnvMarked waits until n processes carry the marker, or fails.
func waitEnvMarked(t *testing.T, marker string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second) // a bound on a loaded machine, not a speed
	for len(withEnvMarker(marker)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d processes up, have %v", n, withEnvMarker(marker))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noEnvSurvivors fails when a process with the marker is left after d.
func noEnvSurvivors(t *testing.T, marker string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for len(withEnvMarker(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := withEnvMarker(marker); len(left) > 0 {
		t.Errorf("processes outlived their command by %v: %v", d, left)
	}
}

// hwmKB is the peak RSS of the container's corral, read from the host.
func hwmKB(t *testing.T, name string) int64 {
	t.Helper()
	pid := mustPodman(t, "inspect", "--format", "{{.State.Pid}}", name)
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no VmHWM in /proc/%s/status", pid)
	return 0
}

// e2bInContainer drives the container's envd face with the E2B JavaScript
// SDK in debug mode: cmd/corral's e2b_client.mjs (commands, background and
// kill of a setsid tree, stdin, a pty, a timeout, a flood) and
// e2b_files.mjs (sbx.files in /workspace, paths out of it refused).
func e2bInContainer(t *testing.T, c *container) {
	node, dir := e2bSDK(t)
	url := "http://127.0.0.1:" + c.envd
	const floodMiB = 256
	markers := map[string]string{}
	for _, name := range []string{"plain", "kill", "timeout", "pty"} {
		markers[name] = fmt.Sprintf("e2b-%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())
	}
	mj, _ := json.Marshal(markers)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "e2b_client.mjs"), url, string(mj), strconv.Itoa(floodMiB))
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
		if t.Failed() {
			t.Logf("node stderr:\n%s", stderr)
		}
	}()
	type step struct {
		Step                    string
		Stdout, Stderr          string
		ExitCode                *int
		ExitError, Killed       bool
		First, Resized          bool
		Name                    string
		Ms                      int64
		Size, Received, Skipped int64
		Listed                  []json.RawMessage
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
		switch st.Step {
		case "echo":
			if st.Stdout != "hi\n" || exit(st) != 0 {
				t.Errorf("run('echo hi'): %s", sc.Text())
			}
		case "fail":
			if !st.ExitError || exit(st) != 3 || st.Stderr != "oops\n" {
				t.Errorf("a failing command: %s, want CommandExitError with exit code 3 and its stderr", sc.Text())
			}
		case "background":
			waitEnvMarked(t, markers["kill"], 3) // bash, the setsid sleep, the sleep
			fmt.Fprintln(stdin, "go")
		case "kill":
			if left := withEnvMarker(markers["kill"]); len(left) > 0 {
				t.Errorf("after handle.kill() returned: %v", left)
			}
			if !st.Killed || exit(st) != -1 {
				t.Errorf("kill: %s, want killed with exit code -1", sc.Text())
			}
		case "sendStdin":
			if st.Stdout != "got hello\n" {
				t.Errorf("sendStdin: %s", sc.Text())
			}
		case "waiting":
			// The client waits for a go before it lists the process
			// that waits for input (cmd/corral's envd test also checks
			// List's waiting field there).
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
			if !st.First || !st.Resized || !strings.Contains(st.Stdout, "24 80") || !st.Killed {
				t.Errorf("pty: %s, want \"24 80\", pty-42, \"30 100\" after resize and killed", sc.Text())
			}
			noEnvSurvivors(t, markers["pty"], 3*time.Second)
			fmt.Fprintln(stdin, "go")
		case "timeout":
			if st.Ms > 10000 || (st.Name != "TimeoutError" && !st.ExitError) {
				t.Errorf("timeoutMs 1500: %s, want a TimeoutError or CommandExitError within seconds", sc.Text())
			}
			noEnvSurvivors(t, markers["timeout"], 3*time.Second)
			baseKB = hwmKB(t, c.name)
			fmt.Fprintln(stdin, "go")
		case "flood":
			peak := hwmKB(t, c.name)
			t.Logf("flood of %d MiB through the container's envd: the SDK received %d bytes, was told of %d skipped; corral's peak RSS %d kB before, %d kB after",
				floodMiB, st.Received, st.Skipped, baseKB, peak)
			if exit(st) != 0 || st.Received+st.Skipped != st.Size {
				t.Errorf("flood: %s, want exit 0 and every byte received or counted as skipped", sc.Text())
			}
			if grew := (peak - baseKB) << 10; grew > 32<<20 {
				t.Errorf("corral's peak RSS grew by %d MiB during the flood, want under 32 MiB", grew>>20)
			}
		}
	}
	if want := "echo fail onStdout background kill wait sendStdin waiting listWaiting closeStdin pty timeout flood"; strings.Join(seen, " ") != want {
		t.Errorf("steps %v, want %s", seen, want)
	}
	noEnvSurvivors(t, markers["plain"], time.Second)

	// sbx.files beneath /workspace, with a symlink out, /secret beside the
	// root, and /etc to plant into.
	mustPodman(t, "exec", "-u", "0", c.name, "sh", "-c",
		"mkdir -p /tmp/outside && echo secret > /tmp/outside/secret && echo secret > /secret && ln -sfn /tmp/outside /workspace/out")
	out, err := exec.CommandContext(ctx, node, filepath.Join(dir, "e2b_files.mjs"), url, "/workspace").Output()
	if err != nil {
		t.Fatalf("node e2b_files.mjs: %v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for _, name := range []string{"readLinkOut", "readDotDot", "writeOutside", "getInfoLinkOut"} {
		m, _ := got[name].(map[string]any)
		msg, _ := m["message"].(string)
		if m["error"] == nil || m["error"] == "FileNotFoundError" || !strings.Contains(msg, "outside the sandbox root") {
			t.Errorf("%s: %v, want an error saying the path is outside the root (not FileNotFoundError)", name, got[name])
		}
	}
	for name, want := range map[string]any{"read": "hello files\n", "readRenamed": "hello files\n", "exists": true,
		"existsMissing": false, "existsRemoved": false, "remove": "ok", "makeDir": true} {
		if got[name] != want {
			t.Errorf("sbx.files %s: %v, want %v", name, got[name], want)
		}
	}
	if _, err := podman(t, "exec", c.name, "test", "-e", "/etc/corral-e2b-planted"); err == nil {
		t.Error("a file was planted outside the root")
	}
}
