package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunLinksNoServer: the corral binary does not link the servers'
// packages nor the terminal emulator and its tables, whose initialisation
// every corral run would otherwise pay (docs/startup.md); corral-server
// does.
func TestRunLinksNoServer(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	heavy := []string{"github.com/corral-sh/corral/api", "github.com/prometheus/", "google.golang.org/grpc",
		"google.golang.org/protobuf", "github.com/modelcontextprotocol/", "github.com/google/jsonschema-go", "connectrpc.com/",
		"github.com/charmbracelet/x/vt", "github.com/mattn/go-runewidth"}
	deps := func(pkg string) string {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return string(out)
	}
	run, server := deps("."), deps("../corral-server")
	for _, h := range heavy {
		for _, line := range strings.Split(run, "\n") {
			if strings.HasPrefix(line, h) {
				t.Errorf("corral links %s", line)
			}
		}
		if !strings.Contains(server, h) {
			t.Errorf("corral-server does not link %s: is the list out of date?", h)
		}
	}
}

// TestServerMissing: without corral-server next to corral or on PATH,
// serve, mcp, doctor and run --tty fail with a message that says what to
// install, before anything starts; run without --tty does not need it.
func TestServerMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "corral")
	if err := copyFile(corralBinary(t), bin); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + filepath.Dir(mustLookPath(t, "bash")), "CORRAL_DATA_DIR=" + filepath.Join(dir, "data")}
	for _, args := range [][]string{{"serve"}, {"mcp"}, {"doctor"}, {"run", "--tty", "--", "echo ran"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 ||
			!strings.Contains(string(out), "corral: serve, mcp, doctor and run --tty need corral-server, which is neither next to "+bin+" nor on PATH: install it too") {
			t.Errorf("corral %s: %v, output %q", args, err, out)
		}
	}
	cmd := exec.Command(bin, "run", "--", "echo ran")
	cmd.Env = env
	if out, err := cmd.Output(); err != nil || string(out) != "ran\n" {
		t.Errorf("corral run without corral-server: %v, %q", err, out)
	}
}

// TestServerIsExecuted: corral serve becomes corral-server serve in place
// (the same PID: nothing of corral stays in between), and corral-server's
// answer is the answer.
func TestServerIsExecuted(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(corralBinary(t), "doctor", "--no-such-flag").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "Usage: corral doctor") {
		t.Errorf("corral doctor --no-such-flag: %v, %q", err, out)
	}
	cmd := exec.Command(corralBinary(t), "mcp", "--data-dir", t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	for i := 0; ; i++ {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
		if filepath.Base(exe) == serverName {
			break
		}
		if i == 1000 {
			t.Skipf("/proc/%d/exe is %q, not corral-server (no /proc?)", cmd.Process.Pid, exe)
		}
		time.Sleep(time.Millisecond)
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("no %s: %v", name, err)
	}
	return p
}
