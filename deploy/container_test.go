package deploy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"
)

// podmanFlags run containers the way this kind of host allows: runc (crun
// refuses hybrid-cgroup hosts) and cgroupfs (no systemd to ask).
var podmanFlags = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// podman runs podman with podmanFlags and returns its trimmed output.
func podman(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("podman", append(append([]string(nil), podmanFlags...), args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// mustPodman is podman that fails the test on an error.
func mustPodman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podman(t, args...)
	if err != nil {
		t.Fatalf("podman %q: %v\n%s", args, err, out)
	}
	return out
}

// TestContainerImage builds deploy/Containerfile on a base made here by
// mmdebstrap (no registry is needed), runs it with podman, and drives the
// running container: corral doctor, agent-sandbox's gRPC client, the escape
// battery (setsid, double fork, an env -i daemon) with zero survivors inside
// the container, and SIGTERM drained within the grace. It reports the image
// size and the time from podman run to a healthy /v1/health. Every
// container and image it makes is removed. CORRAL_HEAVY=1, root, podman,
// runc and mmdebstrap; skipped with the reason otherwise.
func TestContainerImage(t *testing.T) {
	if os.Getenv("CORRAL_HEAVY") != "1" {
		t.Skip("builds and runs a container image: set CORRAL_HEAVY=1")
	}
	if os.Geteuid() != 0 {
		t.Skip("podman with runc and cgroupfs runs containers here as root only")
	}
	for _, tool := range []string{"podman", "runc", "mmdebstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (apt-get install podman runc mmdebstrap)", tool)
		}
	}
	if out, err := podman(t, "info"); err != nil {
		t.Skipf("podman cannot run here: %v\n%s", err, out)
	}
	id := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	base, image, name := "localhost/corral-base-test-"+id, "localhost/corral-test-"+id, "corral-test-"+id

	// The base: a minimal bookworm from apt's mirror, imported.
	dir, err := os.MkdirTemp(tmpRoot, "image-")
	if err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "base.tar")
	mm := exec.Command("mmdebstrap", "--variant=essential", "--include=bash,coreutils,procps,ca-certificates,passwd",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-exclude=/usr/share/info/*",
		// Perl and OpenSSL only serve the packages' configuration; a static
		// corral needs neither.
		`--customize-hook=chroot "$1" dpkg --purge --force-depends --force-remove-essential perl libperl5.36 perl-modules-5.36 libdb5.3 libgdbm6 libgdbm-compat4 openssl libssl3`,
		"bookworm", tarball)
	if out, err := mm.CombinedOutput(); err != nil {
		t.Skipf("mmdebstrap could not make the base (no Debian mirror?): %v\n%s", err, out)
	}
	mustPodman(t, "import", tarball, base)
	t.Cleanup(func() { podman(t, "rmi", "-f", base) })

	// The context: the entrypoint and a static corral and corral-server (the Go build is
	// skipped), built with the repository's Containerfile.
	ctxDir := filepath.Join(dir, "context")
	if err := os.MkdirAll(filepath.Join(ctxDir, "deploy", "prebuilt"), 0o755); err != nil {
		t.Fatal(err)
	}
	gb := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(ctxDir, "deploy", "prebuilt")+string(filepath.Separator), "./cmd/corral", "./cmd/corral-server")
	gb.Dir, gb.Env = "..", append(os.Environ(), "CGO_ENABLED=0")
	if out, err := gb.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ep, err := os.ReadFile("entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ctxDir, "deploy", "entrypoint.sh"), ep, 0o755)
	for _, target := range []string{"corral-root", "corral"} {
		tag := image + ":" + target
		mustPodman(t, "build", "-f", "Containerfile", "--target", target, "--build-arg", "BASE="+base,
			"--build-arg", "GO_IMAGE="+base, "-t", tag, ctxDir)
		t.Cleanup(func() { podman(t, "rmi", "-f", tag) })
	}
	size, _ := strconv.ParseInt(mustPodman(t, "image", "inspect", "--format", "{{.Size}}", image+":corral"), 10, 64)
	t.Logf("image size (non-root target, uncompressed): %.1f MB", float64(size)/1e6)

	// Run the default (non-root) target on the host's network, the faces on
	// loopback ports of their own.
	ports := freePorts(t, 3)
	begin := time.Now()
	// Explicit limits below this host's: podman's defaults (and "host")
	// make runc fail here with "error setting rlimit type 7" (and 6).
	mustPodman(t, "run", "-d", "--name", name, "--network", "host", "--ulimit", "nofile=16384:16384",
		"--ulimit", "nproc=8192:8192", image+":corral",
		"serve", "--insecure-no-auth", "--listen", "127.0.0.1:"+ports[0], "--sandboxd", "127.0.0.1:"+ports[1],
		"--sandboxd-rest", "127.0.0.1:"+ports[2], "--root-dir", "/workspace", "--grace", "1")
	t.Cleanup(func() { podman(t, "rm", "-f", "-t", "0", name) })
	health := "http://127.0.0.1:" + ports[2] + "/v1/health"
	for {
		resp, err := http.Get(health)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Since(begin) > 60*time.Second {
			logs, _ := podman(t, "logs", name)
			t.Fatalf("not healthy within 60 s: %v\n%s", err, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("podman run to a healthy /v1/health: %v", time.Since(begin).Round(time.Millisecond))

	doctor, err := podman(t, "exec", name, "corral", "doctor")
	t.Logf("corral doctor in a default container (%v):\n%s", err, doctor)

	conn, err := grpc.NewClient("127.0.0.1:"+ports[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := processv1.NewProcessServiceClient(conn)
	resp, err := c.Execute(t.Context(), &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"sh", "-c", "echo hi; id -u; pwd"}}})
	if err != nil || string(resp.GetStdout()) != "hi\n10001\n/workspace\n" {
		t.Errorf("Execute in the container: %q %v, want hi, uid 10001, /workspace", resp.GetStdout(), err)
	}

	// The escape battery: each way out of a process group, under a deadline.
	marker := "corral-escape-" + id
	for _, script := range []string{
		"setsid sleep 300 & sleep 300",                 // a new session
		"(sleep 300 &) ; sleep 300",                    // double fork: reparented
		"env -i setsid sh -c 'sleep 300 &'; sleep 300", // a scrubbed daemon
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		_, err := c.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
			Command: []string{"bash", "-c", script + " # " + marker}}})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%q: %v, want DeadlineExceeded", script, err)
		}
	}
	time.Sleep(2 * time.Second) // the grace (1 s) and the kill
	if ps, _ := podman(t, "exec", name, "ps", "-eo", "pid,args"); strings.Contains(ps, "sleep 300") {
		t.Errorf("processes of the escape battery outlived their deadline in the container:\n%s", ps)
	}

	// SIGTERM to the container: corral drains and exits within its grace.
	st, err := c.Start(t.Context(), &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"sh", "-c", "trap '' TERM; echo up; while :; do sleep 1; done"}}})
	if err != nil {
		t.Fatal(err)
	}
	st.Recv() // init
	st.Recv() // up
	stop := time.Now()
	mustPodman(t, "kill", "--signal", "TERM", name)
	mustPodman(t, "wait", name)
	took := time.Since(stop)
	code := mustPodman(t, "inspect", "--format", "{{.State.ExitCode}}", name)
	if code != "0" || took > 10*time.Second {
		t.Errorf("SIGTERM: exit %s after %v, want 0 within --grace 1 s + 2 s (and the runtime's own time)", code, took)
	}
	t.Logf("SIGTERM to exit, a job ignoring SIGTERM running: %v", took.Round(time.Millisecond))
}

// freePorts returns n loopback ports free a moment ago.
func freePorts(t *testing.T, n int) []string {
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		_, p, _ := net.SplitHostPort(ln.Addr().String())
		out = append(out, p)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}
