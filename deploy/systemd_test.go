package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const unitFile = "systemd/corral.service"

// unit is a parsed systemd unit: section -> key -> values in order.
type unit map[string]map[string][]string

// parseUnit reads the unit at path (no line continuations: the unit has
// none, and a value with one is refused).
func parseUnit(path string) (unit, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
			continue
		case strings.HasSuffix(line, `\`):
			return nil, fmt.Errorf("%s:%d: a continued line", path, n)
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("%s:%d: not a key=value in a section: %q", path, n, line)
		}
		u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return u, sc.Err()
}

// get is the last value of key in section ("" when absent).
func (u unit) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// serveOf returns the unit's corral serve command and the binary's path.
func (u unit) serveOf() (string, serveArgs, error) {
	f := strings.Fields(u.get("Service", "ExecStart"))
	if len(f) < 2 {
		return "", serveArgs{}, fmt.Errorf("ExecStart %q: want corral serve ...", u.get("Service", "ExecStart"))
	}
	s, err := parseServe(f[1:])
	return f[0], s, err
}

// TestUnitPromises checks what deploy/README.md says of the unit.
func TestUnitPromises(t *testing.T) {
	t.Parallel()
	u, err := parseUnit(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	svc := func(k string) string { return u.get("Service", k) }
	for _, kv := range []struct{ key, want, why string }{
		{"Delegate", "yes", "systemd leaves the unit's cgroup subtree to corral"},
		{"KillMode", "mixed", "SIGTERM to corral alone, which kills the trees in order; SIGKILL to what is left"},
		{"KillSignal", "SIGTERM", "corral drains on SIGTERM"},
		{"Type", "exec", "a failure to start corral fails the start"},
	} {
		if got := svc(kv.key); got != kv.want {
			t.Errorf("%s=%q, want %q: %s", kv.key, got, kv.want, kv.why)
		}
	}
	// Hardening that would break the containment or --run-as.
	for key, why := range map[string]string{
		"ProtectControlGroups":  "makes /sys/fs/cgroup read-only: no cgroup tier",
		"ProtectKernelTunables": "makes /sys read-only, /sys/fs/cgroup included",
		"ProtectProc":           "hides processes corral must find in /proc",
		"PrivateUsers":          "maps every user but root to nobody: --run-as breaks",
		"SystemCallFilter":      "must let clone3 (CLONE_INTO_CGROUP) and pidfd calls through; not checked here",
		"CapabilityBoundingSet": "corral as root reads other users' /proc entries and kills their processes",
		"User":                  "a non-root server gets the pgroup tier and cannot --run-as",
	} {
		if _, ok := u["Service"][key]; ok {
			t.Errorf("%s is set: %s", key, why)
		}
	}

	bin, s, err := u.serveOf()
	if err != nil {
		t.Fatal(err)
	}
	if bin != "/usr/local/bin/corral" {
		t.Errorf("ExecStart runs %s, want /usr/local/bin/corral (the install step in the unit's header)", bin)
	}
	if err := s.checkNoTokenOnCommandLine(); err != nil {
		t.Error(err)
	}
	if got := s.flags["token-file"]; got != "%d/token" || !strings.HasPrefix(svc("LoadCredential"), "token:") {
		t.Errorf("--token-file %q with LoadCredential=%q: want %%d/token from LoadCredential=token:...", got, svc("LoadCredential"))
	}
	if s.flags["run-as"] == "" {
		t.Error("no --run-as: a root server would run commands as root")
	}
	drain, err := s.drain()
	if err != nil {
		t.Fatal(err)
	}
	stop, err := time.ParseDuration(svc("TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", svc("TimeoutStopSec"), err)
	}
	if stop < drain+closeHeadroom {
		t.Errorf("TimeoutStopSec=%v < drain %v + %v", stop, drain, closeHeadroom)
	}
}

// verifyUnit runs systemd-analyze verify on a copy of the unit whose
// corral path is an existing executable (verify refuses a missing one), and
// returns what it printed. verify exits 0 even for an unknown key or a bad
// value, which it only prints; the callers judge the output.
func verifyUnit(t *testing.T, edit func(string) string) (string, error) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "/usr/local/bin/corral", "/bin/true")
	if _, err := os.Stat("/bin/true"); err != nil {
		t.Skip("no /bin/true to stand in for corral")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "corral.service")
	if err := os.WriteFile(path, []byte(edit(text)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	return string(out), err
}

// TestUnitVerifies runs systemd-analyze verify, when installed, and fails
// on anything it says about the unit.
func TestUnitVerifies(t *testing.T) {
	t.Parallel()
	out, err := verifyUnit(t, func(s string) string { return s })
	if err != nil || strings.Contains(out, "corral.service") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if out != "" {
		t.Logf("systemd-analyze verify said, of other units:\n%s", out)
	}
	// The same check catches a mistake: an unknown key and a bad value.
	bad, _ := verifyUnit(t, func(s string) string {
		return strings.Replace(s, "KillMode=mixed", "KillMode=mixd\nDelegat=yes", 1)
	})
	if !strings.Contains(bad, "mixd") || !strings.Contains(bad, "Delegat") {
		t.Errorf("systemd-analyze verify did not flag KillMode=mixd and Delegat=yes:\n%s", bad)
	}
}
