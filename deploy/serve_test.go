package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// serveCase is one corral serve command a deployment file runs.
type serveCase struct {
	name   string
	serve  serveArgs
	period time.Duration // what the platform waits after SIGTERM before SIGKILL
	env    []string      // the token's variable, when the file passes it so
	uid    int64         // the user corral runs as there (its group is the same number)
}

// serveCases collects the serve commands of the manifests, the unit and the
// Dockerfile's two targets.
func serveCases(t *testing.T) []serveCase {
	t.Helper()
	var out []serveCase
	for file, objs := range manifests(t) {
		for _, obj := range objs {
			spec, _ := podSpec(obj)
			if spec == nil {
				continue
			}
			cs, err := corralContainers(spec)
			if err != nil || len(cs) != 1 || spec.TerminationGracePeriodSeconds == nil {
				t.Fatalf("%s: %d corral containers, grace period %v: %v (TestManifestPromises says more)",
					file, len(cs), spec.TerminationGracePeriodSeconds, err)
			}
			sc := serveCase{name: file, serve: cs[0].serve,
				period: time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second,
				uid:    runAsUser(spec, cs[0].c)}
			if tokenFromSecret(cs[0].c) {
				sc.env = append(sc.env, tokenEnvName+"=deploy-test-secret-token")
			}
			out = append(out, sc)
		}
	}
	u, err := parseUnit(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	_, s, err := u.serveOf()
	if err != nil {
		t.Fatal(err)
	}
	stop, err := time.ParseDuration(u.get("Service", "TimeoutStopSec"))
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, serveCase{name: unitFile, serve: s, period: stop})

	_, byName, _ := loadDockerfile(t)
	for _, st := range []string{"corral-root", "corral"} {
		cmd, err := execForm(imageCmd(byName, byName[st]))
		if err != nil {
			t.Fatal(err)
		}
		s, err := parseServe(cmd)
		if err != nil {
			t.Fatal(err)
		}
		// docker stop waits 10 s by default before its SIGKILL.
		var uid int64
		if u := byName[st].last("USER"); u != nil {
			if _, err := fmt.Sscanf(u.args, "%d:", &uid); err != nil {
				t.Fatalf("stage %s: USER %s: want uid:gid", st, u.args)
			}
		}
		out = append(out, serveCase{name: "Dockerfile " + st, serve: s, period: 10 * time.Second, uid: uid})
	}
	return out
}

// runAsUser is the uid a container runs as (the image's, 0, when unset).
func runAsUser(spec *corev1.PodSpec, c *corev1.Container) int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return *c.SecurityContext.RunAsUser
	}
	if spec.SecurityContext != nil && spec.SecurityContext.RunAsUser != nil {
		return *spec.SecurityContext.RunAsUser
	}
	return 0
}

// TestServeCommands runs every corral serve command of the deployment files
// against corral built from this tree, with only what a test must change
// (a loopback port, a scratch data directory, a user that exists here for
// --run-as), as the user the file runs it as when this test runs as root
// (else as this test's user): corral accepts the flags, answers /healthz
// without the token (a non-root server reports the pgroup tier),
// and on SIGTERM, with a background job that ignores SIGTERM running, exits
// 0 within the platform's grace period, leaving no process of the job.
func TestServeCommands(t *testing.T) {
	bin := corral(t)
	for _, sc := range serveCases(t) {
		t.Run(strings.NewReplacer("/", "_", " ", "_").Replace(sc.name), func(t *testing.T) {
			t.Parallel()
			runServeCase(t, bin, sc)
		})
	}
}

func runServeCase(t *testing.T, bin string, sc serveCase) {
	// Not t.TempDir: its parent is 0700, and the server may run as another
	// user; tmpRoot is made 0755 below when it does.
	dir, err := os.MkdirTemp(tmpRoot, "case-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	args := append([]string(nil), sc.serve.args...)
	for i := 0; i < len(args)-1; i++ {
		switch args[i] {
		case "--run-as":
			if os.Geteuid() != 0 {
				t.Skip("--run-as needs root")
			}
			if _, err := user.Lookup("nobody"); err != nil {
				t.Skip("no user nobody to stand in for", args[i+1])
			}
			args[i+1] = "nobody"
		case "--token-file":
			// %d is the unit's credentials directory.
			p := filepath.Join(dir, "credentials", "token")
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("deploy-test-credential-token\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			args[i+1] = strings.Replace(args[i+1], "%d", filepath.Dir(p), 1)
		}
	}
	args = append(args, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"))
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), sc.env...)
	cmd.Env = append(cmd.Env, "CORRAL_CONTAINMENT=") // the tier corral picks, not a caller's
	asUser := os.Geteuid() == 0 && sc.uid != 0
	uid := int64(os.Geteuid())
	if asUser {
		uid = sc.uid
		// The binary's directories are root's (0700 from MkdirTemp).
		for _, d := range []string{tmpRoot, filepath.Dir(bin)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(dir, int(sc.uid), int(sc.uid)); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(sc.uid), Gid: uint32(sc.uid)}}
		cmd.Env = append(cmd.Env, "HOME="+dir)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	logs := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		logs <- serving(stderr)
		io.Copy(io.Discard, stderr) // until the process exits
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // os.ErrProcessDone once it was waited for
		<-done
	})

	var addr string
	select {
	case addr = <-logs:
	case <-time.After(30 * time.Second):
		t.Fatal("no \"serving\" line within 30 s")
	}
	if addr == "" {
		t.Fatalf("%s %q exited before serving: %v", bin, args, <-exited)
	}
	base := "http://" + addr
	tier := health(t, base)
	if asUser && tier != "pgroup" {
		t.Errorf("corral as uid %d reports tier %s, want pgroup (deploy/README.md)", sc.uid, tier)
	}

	// A background job whose shell ignores SIGTERM and lives on (the
	// marker is in its command line): the way down must wait the grace
	// out, then SIGKILL it.
	marker := fmt.Sprintf("deploy-drain-%d-%d", os.Getpid(), time.Now().UnixNano())
	job := fmt.Sprintf(`{"command": "trap '' TERM; echo ready; while :; do sleep 1; done; : %s"}`, marker)
	var started struct{ ID string }
	call(t, sc, dir, "POST", base+"/v1/jobs", job, &started)
	for i := 0; ; i++ {
		var out struct{ Data string }
		call(t, sc, dir, "GET", base+"/v1/jobs/"+started.ID+"/output?wait=10", "", &out)
		if strings.Contains(out.Data, "ready") {
			break
		}
		if i == 3 {
			t.Fatalf("job %s printed no \"ready\" in 30 s", started.ID)
		}
	}
	grace, err := sc.serve.grace()
	if err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		took := time.Since(begin)
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", err)
		}
		if took < grace {
			t.Errorf("exited %v after SIGTERM: the job that ignores SIGTERM got less than --grace %v", took, grace)
		}
		if took >= sc.period {
			t.Errorf("drained in %v, not within the grace period %v", took, sc.period)
		}
		t.Logf("uid %d, tier %s: SIGTERM to exit %v (grace period %v)", uid, tier, took.Round(time.Millisecond), sc.period)
	case <-time.After(sc.period):
		t.Fatalf("still running %v after SIGTERM: the platform would SIGKILL it", sc.period)
	}
	if pids := withMarker(marker); len(pids) > 0 {
		t.Errorf("processes of the job outlived corral: %v", pids)
	}
}

// serving reads corral's JSON log until the "serving" line and returns its
// listen address ("" if the log ended first).
func serving(r io.Reader) string {
	sc := bufio.NewScanner(r)
	addr := ""
	for sc.Scan() {
		var l struct{ Message, Listen string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Message == "serving" {
			addr = l.Listen
			break
		}
	}
	return addr
}

// health GETs /healthz without a token and returns the tier it reports.
func health(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + healthPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct{ Status, Tier string }
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != 200 || h.Status != "ok" {
		t.Fatalf("GET /healthz: %d %+v %v", resp.StatusCode, h, err)
	}
	return h.Tier
}

// call makes an authenticated request and decodes its JSON answer into v.
func call(t *testing.T, sc serveCase, dir, method, url, body string, v any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token(t, sc, dir))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, url, err, b)
	}
}

// token is the token the case's server requires.
func token(t *testing.T, sc serveCase, dir string) string {
	t.Helper()
	for _, e := range sc.env {
		if v, ok := strings.CutPrefix(e, tokenEnvName+"="); ok {
			return v
		}
	}
	if _, ok := sc.serve.flags["token-file"]; ok {
		return "deploy-test-credential-token"
	}
	// No token given: corral generated one into the data directory.
	b, err := os.ReadFile(filepath.Join(dir, "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// withMarker lists the processes whose command line holds marker.
func withMarker(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, e.Name())
		}
	}
	return out
}
