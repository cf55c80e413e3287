package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
)

// nobodyID is the user the tests run unprivileged things as.
const nobodyID = 65534

// asRoot skips t unless it runs as root with setpriv at hand.
func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv")
	}
}

// publicDir makes a temporary directory that uid owns and every user may
// enter; it is removed at cleanup.
func publicDir(t *testing.T, uid int) string {
	t.Helper()
	d, err := os.MkdirTemp("", "corral-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, uid); err != nil {
		t.Fatal(err)
	}
	return d
}

// corralBinaryIn builds corral and corral-server into dir.
func corralBinaryIn(t *testing.T, dir string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the corral binary")
	}
	if err := buildBoth(dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "corral")
}

// asNobody is cmd run as nobody (no supplementary groups) through setpriv.
func asNobody(bin string, args ...string) *exec.Cmd {
	id := strconv.Itoa(nobodyID)
	return exec.Command("setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "--", bin}, args...)...)
}

// TestServeRunAs serves as root with --run-as nobody and a generated token:
// a command runs as nobody and cannot read the token file, signal the
// server or read its environment; what it leaves behind is killed.
func TestServeRunAs(t *testing.T) {
	asRoot(t)
	t.Parallel()
	// A data directory anyone may enter: only the token file's mode keeps
	// nobody out.
	dataDir := publicDir(t, 0)
	cmd := exec.Command(corralBinary(t), "serve", "--data-dir", dataDir, "--grace", "0.5", "--listen", "127.0.0.1:0", "--run-as", "nobody")
	cmd.Env = append(os.Environ(), "CORRAL_TOKEN=")
	s := startServeCmd(t, cmd, dataDir)
	if s.token == "" {
		t.Fatal("no generated token")
	}
	if !strings.Contains(s.logs.String(), `"runAs":"nobody"`) {
		t.Errorf("the serving line does not name the user:\n%s", s.logs)
	}
	tokenFile := logField(s.logs.String(), "tokenFile")
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %q: %v %v", tokenFile, fi, err)
	}
	_, marker := proctest.Marker(t)
	pid := s.cmd.Process.Pid
	res := s.exec(fmt.Sprintf(`{"command":"id -un; cat %s && echo READ-TOKEN; kill -0 %d && echo SIGNALLED; cat /proc/%d/environ >/dev/null && echo READ-ENVIRON; sleep 1000 &","env":{"%s":"%s"}}`,
		tokenFile, pid, pid, proctest.MarkerEnv, marker))
	if res.Stdout != "nobody\n" {
		t.Errorf("stdout %q, want only nobody (stderr %q)", res.Stdout, res.Stderr)
	}
	if res.Kill.Lingering != 1 {
		t.Errorf("kill %+v, want the sleep lingering", res.Kill)
	}
	proctest.NoSurvivors(t, marker, 0)
}

// logField is the value of the first JSON log field name in logs.
func logField(logs, name string) string {
	_, rest, ok := strings.Cut(logs, `"`+name+`":"`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// TestServeNonDumpable serves as nobody (a server that is not root) with the
// token in its environment: a command, also nobody, cannot read the server's
// /proc/<pid>/environ (the server is non-dumpable) though it can read its
// own, and the token is not on the server's command line; what the command
// leaves behind is still killed.
func TestServeNonDumpable(t *testing.T) {
	asRoot(t)
	t.Parallel()
	bin := corralBinaryIn(t, publicDir(t, 0))
	dataDir := publicDir(t, nobodyID)
	token := fmt.Sprintf("tok-%d-secret", os.Getpid())
	cmd := asNobody(bin, "serve", "--data-dir", dataDir, "--grace", "0.5", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "CORRAL_TOKEN="+token, "CORRAL_CONTAINMENT=")
	s := startServeCmd(t, cmd, dataDir)
	s.token = token
	pid := s.cmd.Process.Pid
	_, marker := proctest.Marker(t)
	res := s.exec(fmt.Sprintf(`{"command":"id -u; cat /proc/%d/environ >/dev/null && echo READ-ENVIRON; cat /proc/$$/environ >/dev/null && echo OWN-ENVIRON; tr '\\0' ' ' </proc/%d/cmdline | grep -c tok-; sleep 1000 &","env":{"%s":"%s"}}`,
		pid, pid, proctest.MarkerEnv, marker))
	if want := fmt.Sprintf("%d\nOWN-ENVIRON\n0\n", nobodyID); res.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
	// A non-dumpable server still finds and kills what a command leaves.
	if res.Kill.Lingering != 1 {
		t.Errorf("kill %+v, want the sleep lingering", res.Kill)
	}
	proctest.NoSurvivors(t, marker, 0)
	if _, err := os.Stat(filepath.Join(dataDir, "token")); err == nil {
		t.Errorf("a token file was written although $CORRAL_TOKEN gave the token")
	}
}

// TestRunAsNeedsRoot: --run-as in a process that is not root is refused at
// start with the reason, by serve (which then writes no token) and by run;
// a token file the server cannot read, or that belongs to another user, is
// refused with the reason.
func TestRunAsNeedsRoot(t *testing.T) {
	asRoot(t)
	t.Parallel()
	bin := corralBinaryIn(t, publicDir(t, 0))
	dataDir := publicDir(t, nobodyID)
	const want = "only root can run commands as another user, and this process runs as uid 65534"
	rootOnly := filepath.Join(t.TempDir(), "root.tok")
	os.WriteFile(rootOnly, []byte("tok\n"), 0o600)
	nobodys := filepath.Join(publicDir(t, 0), "nobody.tok")
	os.WriteFile(nobodys, []byte("tok\n"), 0o600)
	os.Chown(nobodys, nobodyID, nobodyID)
	for _, tc := range []struct {
		cmd  *exec.Cmd
		want string
	}{
		{asNobody(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--run-as", "nobody"), want},
		{asNobody(bin, "run", "--data-dir", dataDir, "--run-as", "nobody", "--", "true"), want},
		{asNobody(bin, "mcp", "--data-dir", dataDir, "--run-as", "nobody"), want},
		{asNobody(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--token-file", rootOnly), "root.tok: permission denied"},
		{exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--token-file", nobodys), "nobody.tok belongs to uid 65534, not to this user (uid 0)"},
	} {
		tc.cmd.Env = append(os.Environ(), "CORRAL_TOKEN=")
		out, err := tc.cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v, output %s; want exit 1 and %q", tc.cmd.Args, err, out, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "token")); err == nil {
		t.Errorf("a server that refused to start wrote a token")
	}
}

// TestRunRunAs: corral run --run-as runs the command as that user, in a
// directory it may enter.
func TestRunRunAs(t *testing.T) {
	asRoot(t)
	t.Parallel()
	cmd := exec.Command(corralBinary(t), "run", "--data-dir", t.TempDir(), "--run-as", "nobody", "--", `id -un; test -x "$PWD" && echo entered`)
	cmd.Dir = publicDir(t, 0)
	out, err := cmd.Output()
	if err != nil || string(out) != "nobody\nentered\n" {
		t.Errorf("%v: stdout %q", err, out)
	}
}

// TestDoctorRunAs: as root on a cgroup tier, doctor --run-as nobody says
// every guarantee holds; without --run-as none does.
func TestDoctorRunAs(t *testing.T) {
	asRoot(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--run-as", "nobody"}, "yes"},
		{[]string{"doctor"}, "no"},
	} {
		var out, errs strings.Builder
		// No data directory, no forced tier: nothing of this environment.
		cmd := exec.Command(corralBinary(t), tc.args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = []string{"PATH=" + os.Getenv("PATH")}, &out, &errs
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v: %s", tc.args, err, errs.String())
		}
		if !strings.Contains(out.String(), "cgroup2  yes    yes") && !strings.Contains(out.String(), "cgroup1  yes    yes") {
			t.Skipf("no cgroup tier here:\n%s", out.String())
		}
		_, table, _ := strings.Cut(out.String(), "A COMMAND")
		rows := strings.Split(strings.TrimSpace(table), "\n")[1:6]
		for _, row := range rows {
			if f := strings.Fields(row[strings.Index(row, "  "):]); f[0] != tc.want {
				t.Errorf("%v: %q, want %s", tc.args, row, tc.want)
			}
		}
	}
}
