package deploy

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// serveShutdownSlack is what serve adds to --grace for its shutdown
// deadline (cmd/corral-server/serve.go: context.WithTimeout(..., grace+2*time.Second)).
const serveShutdownSlack = 2 * time.Second

// defaultGrace is serve's --grace default (supervisor.DefaultGrace).
const defaultGrace = 2 * time.Second

// closeHeadroom is what a grace period must leave past serve's shutdown
// deadline: closing the supervisor (it kills what is left) and exiting.
const closeHeadroom = 5 * time.Second

// tmpRoot is this test binary's scratch directory, removed by TestMain.
var tmpRoot string

// atExit are what TestMain runs once every test ended (what tests share,
// such as the container image, is removed there).
var atExit []func()

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "corral-deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir
	code := m.Run()
	for _, f := range atExit {
		f()
	}
	os.RemoveAll(dir)
	// Every server the tests started has exited; their connections with it.
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// raceBuild is true in a -race test binary (race_test.go).
var raceBuild bool

var corralBin struct {
	once sync.Once
	path string
	err  error
}

// corral builds corral (and corral-server) from the parent module, once per test binary, and
// returns its path. It skips the test where corral's server does not run.
func corral(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the deployment targets are Linux")
	}
	corralBin.once.Do(func() {
		p := filepath.Join(tmpRoot, "bin", "corral")
		args := []string{"build", "-o", filepath.Dir(p) + string(filepath.Separator)}
		if raceBuild {
			args = append(args, "-race")
		}
		// corral-server beside it: corral serve executes it.
		cmd := exec.Command("go", append(args, "./cmd/corral", "./cmd/corral-server")...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			corralBin.err = fmt.Errorf("go build ./cmd/corral: %v\n%s", err, out)
			return
		}
		corralBin.path = p
	})
	if corralBin.err != nil {
		t.Fatal(corralBin.err)
	}
	return corralBin.path
}

// serveArgs is a parsed `corral serve` command line.
type serveArgs struct {
	args  []string          // as written, "serve" first
	flags map[string]string // --name value or --name=value; a bare --name is "true"
}

// parseServe parses args, which must start with "serve".
func parseServe(args []string) (serveArgs, error) {
	if len(args) == 0 || args[0] != "serve" {
		return serveArgs{}, fmt.Errorf("want a corral serve command, got %q", args)
	}
	s := serveArgs{args: args, flags: map[string]string{}}
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			return s, fmt.Errorf("argument %q is not a flag", a)
		}
		if n, v, ok := strings.Cut(name, "="); ok {
			s.flags[n] = v
			continue
		}
		switch name {
		case "reaper", "insecure-no-auth": // corral serve's boolean flags used here
			s.flags[name] = "true"
			continue
		}
		if i+1 >= len(args) {
			return s, fmt.Errorf("flag %q has no value", a)
		}
		s.flags[name] = args[i+1]
		i++
	}
	return s, nil
}

// grace is the command's --grace (serve's default when absent).
func (s serveArgs) grace() (time.Duration, error) {
	v, ok := s.flags["grace"]
	if !ok {
		return defaultGrace, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("--grace %q: want seconds", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// drain is the longest serve's shutdown takes before it closes the
// supervisor: --grace + 2 s.
func (s serveArgs) drain() (time.Duration, error) {
	g, err := s.grace()
	return g + serveShutdownSlack, err
}

// checkNoTokenOnCommandLine refuses the flags that put the token on the
// command line or drop it.
func (s serveArgs) checkNoTokenOnCommandLine() error {
	for _, f := range []string{"token", "insecure-no-auth"} {
		if _, ok := s.flags[f]; ok {
			return fmt.Errorf("serve has --%s: the token must come from a Secret or a credential", f)
		}
	}
	return nil
}
