//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// corralBin is the corral binary TestMain built for this run.
var corralBin string

// TestMain dispatches proctest helpers; otherwise it builds cmd/corral into a
// temporary directory, runs the tests and removes the directory.
func TestMain(m *testing.M) {
	if os.Getenv(proctest.HelperEnv) != "" {
		proctest.Main(m) // Runs the helper and exits.
	}
	dir, err := os.MkdirTemp("", "corral-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	corralBin = filepath.Join(dir, "corral")
	code := 1
	if err := buildCorral(corralBin); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
	} else if code = m.Run(); code == 0 {
		// Every server, client, supervisor and MCP session a test started
		// must have been closed with it.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: goroutines left after the tests:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildCorral builds ../cmd/corral to out, and corral-server next to it, with the go command that runs this
// test (GOROOT/bin/go, else go from PATH).
func buildCorral(out string) error {
	gocmd := filepath.Join(goroot(), "bin", "go")
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	// corral-server beside it: corral serve and corral mcp execute it.
	cmd := exec.Command(gocmd, "build", "-o", filepath.Dir(out)+string(filepath.Separator),
		"github.com/corral-sh/corral/cmd/corral", "github.com/corral-sh/corral/cmd/corral-server")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build cmd/corral cmd/corral-server: %w", err)
	}
	return nil
}

// goroot asks `go env GOROOT` only when GOROOT is unset.
func goroot() string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// call is one command a scenario runs through a frontend.
type call struct {
	// command is the shell command line; the frontend adds the marker.
	command string
	// marker is the value of proctest.MarkerEnv every process of the command carries.
	marker string
	// timeout in seconds; 0 is corral's default.
	timeout float64
	// dir is the working directory; "" is a fresh temporary directory.
	dir string
}

// A frontend runs one call to the end and returns its Result. It fails the
// test when the call does not return within limit (so a hang is reported as
// pipes that never reached EOF).
type frontend struct {
	name string
	run  func(t *testing.T, c call) supervisor.Result
}

// callLimit bounds one call of a scenario: the largest timeout a scenario
// passes (300 s, the floods) plus corral's grace and settle. A call that
// does not return by then hangs on a pipe; the floods' own throughput is
// measured by the benchmarks, not bounded here.
const callLimit = 310 * time.Second

// markedCommand exports the marker in the shell before the command, for the
// frontends whose only input is the command line.
func markedCommand(c call) string {
	return "export " + proctest.MarkerEnv + "=" + c.marker + "; " + c.command
}

// cliFrontend runs `corral run --json` with the containment tier forced
// through CORRAL_CONTAINMENT ("" is the strongest).
func cliFrontend(tier string) frontend {
	name := "cli"
	if tier != "" {
		name += "-" + tier
	}
	return frontend{name: name, run: func(t *testing.T, c call) supervisor.Result {
		t.Helper()
		args := []string{"run", "--json"}
		if c.timeout > 0 {
			args = append(args, "--timeout", strconv.FormatFloat(c.timeout, 'f', -1, 64))
		}
		if c.dir == "" {
			c.dir = t.TempDir()
		}
		args = append(args, "--cwd", c.dir, "--", markedCommand(c))
		out := runCLI(t, []string{"CORRAL_CONTAINMENT=" + tier}, args...)
		return decodeResult(t, out)
	}}
}

// runCLI runs the corral binary with args and extra environment entries, a
// fresh data directory, and returns its stdout. It fails t when corral exits
// non-zero or does not return within callLimit.
func runCLI(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, args...)
	cmd.Env = append(os.Environ(), "CORRAL_DATA_DIR="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("corral %s did not return within %v (a pipe never reached EOF?); stderr: %s", strings.Join(args, " "), callLimit, stderr.Bytes())
	}
	if err != nil {
		t.Fatalf("corral %s: %v; stderr: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// decodeResult decodes a Result JSON, refusing unknown fields so that the
// wire contract and the Go type stay the same.
func decodeResult(t testing.TB, b []byte) supervisor.Result {
	t.Helper()
	var res supervisor.Result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("decode Result: %v; body: %.500s", err, b)
	}
	return res
}

// libFrontend runs calls through one in-process Supervisor.
func libFrontend(sup *supervisor.Supervisor) frontend {
	return frontend{name: "library", run: func(t *testing.T, c call) supervisor.Result {
		t.Helper()
		return runLib(t, sup, c, nil)
	}}
}

// runLib runs c through sup with the marker in Request.Env and an optional
// event callback.
func runLib(t *testing.T, sup *supervisor.Supervisor, c call, onEvent func(supervisor.Event)) supervisor.Result {
	t.Helper()
	if c.dir == "" {
		c.dir = t.TempDir()
	}
	req := supervisor.Request{
		Command: c.command,
		Dir:     c.dir,
		Env:     map[string]string{proctest.MarkerEnv: c.marker},
		Timeout: time.Duration(c.timeout * float64(time.Second)),
		OnEvent: onEvent,
	}
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	res, err := sup.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run(%q): %v", c.command, err)
	}
	if res.Aborted {
		t.Fatalf("Run(%q) did not return within %v", c.command, callLimit)
	}
	return res
}

// newLib returns a Supervisor with spills in a temporary directory, closed
// at cleanup.
func newLib(t testing.TB, cfg supervisor.Config) *supervisor.Supervisor {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	sup, err := supervisor.New(cfg)
	if err != nil {
		t.Fatalf("supervisor.New: %v", err)
	}
	t.Cleanup(func() {
		if err := sup.Close(); err != nil {
			t.Errorf("supervisor Close: %v", err)
		}
	})
	return sup
}

// exitCode returns the Result's exit code, or -1 when the shell did not exit.
func exitCode(r supervisor.Result) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}
