package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// runLimits are explicit limits below this host's: podman's defaults (and
// "host") make runc fail here with "error setting rlimit type 7" (and 6).
var runLimits = []string{"--ulimit", "nofile=16384:16384", "--ulimit", "nproc=8192:8192"}

// maxImageBytes is the promise on the default image's size, uncompressed
// (podman image inspect's Size).
const maxImageBytes = 60_000_000

// requirePodman: with CORRAL_REQUIRE_PODMAN=1 (CI sets it) the container
// tests fail where they would skip, so a run cannot pass without a container
// having run.
func requirePodman() bool { return os.Getenv("CORRAL_REQUIRE_PODMAN") == "1" }

// setupFailed skips t with the reason, or fails it under
// CORRAL_REQUIRE_PODMAN=1.
func setupFailed(t testing.TB, format string, args ...any) {
	t.Helper()
	if requirePodman() {
		t.Fatalf("CORRAL_REQUIRE_PODMAN=1, but: "+format, args...)
	}
	t.Skipf(format, args...)
}

// podman runs podman with podmanFlags and returns its trimmed output.
func podman(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("podman", append(append([]string(nil), podmanFlags...), args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// mustPodman is podman that fails the test on an error.
func mustPodman(t testing.TB, args ...string) string {
	t.Helper()
	out, err := podman(t, args...)
	if err != nil {
		t.Fatalf("podman %q: %v\n%s", args, err, out)
	}
	return out
}

// built is the image the container tests share, built once per test binary
// and removed when it exits (atExit).
var built struct {
	once      sync.Once
	image     string // repository; the targets are image:corral and image:corral-root
	setupErr  error  // what this host lacks (a skip, or a failure when required)
	buildErr  error  // a failure of the build itself
	binBytes  int64  // the static corral and corral-server, together
	baseBytes int64  // the imported base's size
}

// containerImage builds deploy/Containerfile's two targets on a base made
// here by mmdebstrap (no registry is needed) and returns the image's name.
// CORRAL_HEAVY=1, root, podman, runc and mmdebstrap; setupFailed otherwise.
func containerImage(t testing.TB) string {
	t.Helper()
	if os.Getenv("CORRAL_HEAVY") != "1" {
		setupFailed(t, "builds and runs a container image: set CORRAL_HEAVY=1")
	}
	built.once.Do(buildImage)
	if built.setupErr != nil {
		setupFailed(t, "%v", built.setupErr)
	}
	if built.buildErr != nil {
		t.Fatal(built.buildErr)
	}
	return built.image
}

func buildImage() {
	if os.Geteuid() != 0 {
		built.setupErr = errors.New("podman with runc and cgroupfs runs containers here as root only")
		return
	}
	for _, tool := range []string{"podman", "runc", "mmdebstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			built.setupErr = fmt.Errorf("%s not found (apt-get install podman runc mmdebstrap)", tool)
			return
		}
	}
	podmanCmd := func(args ...string) (string, error) {
		out, err := exec.Command("podman", append(append([]string(nil), podmanFlags...), args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := podmanCmd("info"); err != nil {
		built.setupErr = fmt.Errorf("podman cannot run here: %v\n%s", err, out)
		return
	}
	id := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	base, image := "localhost/corral-base-test-"+id, "localhost/corral-test-"+id

	// The base: a minimal bookworm from apt's mirror, imported.
	dir, err := os.MkdirTemp(tmpRoot, "image-")
	if err != nil {
		built.buildErr = err
		return
	}
	tarball := filepath.Join(dir, "base.tar")
	mm := exec.Command("nice", "-n", "10", "mmdebstrap", "--variant=essential", "--include=bash,coreutils,procps,ca-certificates,passwd",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-include=/usr/share/doc/*/copyright",
		"--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
		"--dpkgopt=path-exclude=/usr/share/info/*",
		// Perl and OpenSSL only serve the packages' configuration; a static
		// corral needs neither.
		`--customize-hook=chroot "$1" dpkg --purge --force-depends --force-remove-essential perl libperl5.36 perl-modules-5.36 libdb5.3 libgdbm6 libgdbm-compat4 openssl libssl3`,
		"bookworm", tarball)
	if out, err := mm.CombinedOutput(); err != nil {
		built.setupErr = fmt.Errorf("mmdebstrap could not make the base (no Debian mirror?): %v\n%s", err, out)
		return
	}
	if out, err := podmanCmd("import", tarball, base); err != nil {
		built.buildErr = fmt.Errorf("podman import: %v\n%s", err, out)
		return
	}
	atExit = append(atExit, func() { podmanCmd("rmi", "-f", base) })
	if s, err := podmanCmd("image", "inspect", "--format", "{{.Size}}", base); err == nil {
		built.baseBytes, _ = strconv.ParseInt(s, 10, 64)
	}

	// The context: the entrypoint and a static corral and corral-server (the Go build is
	// skipped), built with the repository's Containerfile.
	ctxDir := filepath.Join(dir, "context")
	bin := filepath.Join(ctxDir, "deploy", "prebuilt", "corral")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		built.buildErr = err
		return
	}
	gb := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Dir(bin)+string(filepath.Separator), "./cmd/corral", "./cmd/corral-server")
	gb.Dir, gb.Env = "..", append(os.Environ(), "CGO_ENABLED=0")
	if out, err := gb.CombinedOutput(); err != nil {
		built.buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		return
	}
	for _, b := range []string{bin, bin + "-server"} {
		if fi, err := os.Stat(b); err == nil {
			built.binBytes += fi.Size()
		}
	}
	ep, err := os.ReadFile("entrypoint.sh")
	if err == nil {
		err = os.WriteFile(filepath.Join(ctxDir, "deploy", "entrypoint.sh"), ep, 0o755)
	}
	if err != nil {
		built.buildErr = err
		return
	}
	for _, target := range []string{"corral-root", "corral"} {
		tag := image + ":" + target
		out, err := exec.Command("nice", append(append([]string{"-n", "10", "podman"}, podmanFlags...),
			"build", "-f", "Containerfile", "--target", target, "--build-arg", "BASE="+base,
			"--build-arg", "GO_IMAGE="+base, "-t", tag, ctxDir)...).CombinedOutput()
		if err != nil {
			built.buildErr = fmt.Errorf("podman build --target %s: %v\n%s", target, err, out)
			return
		}
		atExit = append(atExit, func() { podmanCmd("rmi", "-f", tag) })
	}
	built.image = image
}

// container is one running container of the test image and its loopback
// ports (the host's network): the API, sandboxd gRPC and REST, envd.
type container struct {
	name                  string
	api, grpc, rest, envd string // ports
	started, healthy      time.Time
	client                processv1.ProcessServiceClient
}

// runContainer starts target with podman run -d (opts before the image)
// serving every face on loopback ports of its own, with serveArgs added,
// and waits until /v1/health answers 200. The container is removed at the
// test's end.
func runContainer(t *testing.T, image, target string, opts []string, serveArgs ...string) *container {
	t.Helper()
	ports := freePorts(t, 4)
	c := &container{name: fmt.Sprintf("corral-test-%d-%d", os.Getpid(), time.Now().UnixNano()),
		api: ports[0], grpc: ports[1], rest: ports[2], envd: ports[3]}
	args := append([]string{"run", "-d", "--name", c.name, "--network", "host"}, runLimits...)
	args = append(append(args, opts...), image+":"+target,
		"serve", "--insecure-no-auth", "--listen", "127.0.0.1:"+c.api, "--sandboxd", "127.0.0.1:"+c.grpc,
		"--sandboxd-rest", "127.0.0.1:"+c.rest, "--envd", "127.0.0.1:"+c.envd, "--root-dir", "/workspace")
	args = append(args, serveArgs...)
	c.started = time.Now()
	mustPodman(t, args...)
	t.Cleanup(func() { podman(t, "rm", "-f", "-t", "0", c.name) })
	for {
		code, err := healthCode(c.rest)
		if code == 200 {
			break
		}
		if time.Since(c.started) > 60*time.Second {
			logs, _ := podman(t, "logs", c.name)
			t.Fatalf("not healthy within 60 s: %d %v\n%s", code, err, logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.healthy = time.Now()
	conn, err := grpc.NewClient("127.0.0.1:"+c.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c.client = processv1.NewProcessServiceClient(conn)
	return c
}

// podmanRunFloor is how long podman run -d takes to start a container of
// image that runs true, with runContainer's flags: what any image costs
// before its program runs.
func podmanRunFloor(t *testing.T, image string) time.Duration {
	t.Helper()
	name := fmt.Sprintf("corral-floor-%d-%d", os.Getpid(), time.Now().UnixNano())
	args := append([]string{"run", "-d", "--name", name, "--network", "host"}, runLimits...)
	args = append(args, "--entrypoint", "true", image)
	begin := time.Now()
	mustPodman(t, args...)
	took := time.Since(begin)
	podman(t, "rm", "-f", "-t", "0", name)
	return took
}

// healthCode GETs the sandboxd REST face's /v1/health on a new connection:
// its status, or 0 and the error when nothing answered.
func healthCode(port string) (int, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Get("http://127.0.0.1:" + port + "/v1/health")
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// usedTier runs corral doctor in the container and returns the tier it
// says is used and the whole report; doctor failing fails the test.
func usedTier(t *testing.T, name string) (tier, report string) {
	t.Helper()
	report = mustPodman(t, "exec", name, "corral", "doctor")
	for _, line := range strings.Split(report, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == "yes" && (f[1] == "yes" || f[1] == "no") {
			if tier != "" {
				t.Fatalf("corral doctor names two tiers used (%s, %s):\n%s", tier, f[0], report)
			}
			tier = f[0]
		}
	}
	if tier == "" {
		t.Fatalf("corral doctor names no tier used:\n%s", report)
	}
	return tier, report
}

// cgroupVersion is the cgroup version podman runs containers with here.
func cgroupVersion(t *testing.T) string {
	t.Helper()
	return mustPodman(t, "info", "--format", "{{.Host.CgroupsVersion}}")
}

// execute runs a bash script in the container through the sandboxd face
// within d; marker goes into its command line.
func (c *container) execute(t *testing.T, d time.Duration, marker, script string) (*processv1.ExecuteResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return c.client.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
		Command: []string{"bash", "-c", script + " # " + marker}}})
}

// noSurvivorsIn fails unless, within d, no process with marker in its
// command line is left, seen both from the host (every container process
// is one of the host's) and by ps inside the container.
func noSurvivorsIn(t *testing.T, name, marker string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ps, err := podman(t, "exec", name, "ps", "-eo", "pid,args")
		host := withMarker(marker)
		if err == nil && !strings.Contains(ps, marker) && len(host) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes with %s outlived their command by %v: host pids %v; in the container (%v):\n%s", marker, d, host, err, ps)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// escapeBattery runs each way out of a process group under a deadline and
// checks that nothing of it outlives the way down (--grace 1 s, then
// SIGKILL).
func escapeBattery(t *testing.T, c *container, id string) {
	t.Helper()
	marker := "corral-escape-" + id
	for _, script := range []string{
		"setsid sleep 300 & sleep 300",                 // a new session
		"(sleep 300 &) ; sleep 300",                    // double fork: reparented
		"env -i setsid sh -c 'sleep 300 &'; sleep 300", // a scrubbed daemon
	} {
		if _, err := c.execute(t, 1500*time.Millisecond, marker, script); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%q: %v, want DeadlineExceeded", script, err)
		}
	}
	noSurvivorsIn(t, c.name, marker, 3*time.Second)
	// The double-forked sleep has no marker in its command line: none
	// of the battery's sleeps may be left.
	if ps, _ := podman(t, "exec", c.name, "ps", "-eo", "pid,args"); strings.Contains(ps, "sleep 300") {
		t.Errorf("processes of the escape battery outlived their deadline in the container:\n%s", ps)
	}
}

// forkBomb runs a fork bomb in the container for 2 s (its leader, a bash
// that started a sleep before the bomb, waits for that sleep and exits; the
// way down then kills the rest) and checks that nothing of it is left. The
// caller checks what bounded it.
func forkBomb(t *testing.T, c *container, marker string) *processv1.ExecuteResponse {
	t.Helper()
	resp, err := c.execute(t, 30*time.Second, marker, "sleep 2 & s=$!; b() { b | b & }; b; wait $s")
	if err != nil {
		t.Errorf("fork bomb: %v, want its answer once the leader exited", err)
	}
	noSurvivorsIn(t, c.name, marker, 5*time.Second)
	return resp
}

// pidsEvents is the container's pids cgroup's "max" event count (forks
// refused at its pids.max), or -1 where it cannot be read.
func pidsEvents(t *testing.T, name string) int {
	t.Helper()
	cg := mustPodman(t, "inspect", "--format", "{{.State.CgroupPath}}", name)
	for _, dir := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		b, err := os.ReadFile(filepath.Join(dir, cg, "pids.events"))
		if err != nil {
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "max "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// TestContainerImage builds deploy/Containerfile on a base made here by
// mmdebstrap (no registry is needed), runs it with podman, and drives the
// running containers: its size, corral doctor's tier, agent-sandbox's gRPC
// client, the e2b SDK over the envd face, the escape battery and a fork bomb
// with zero survivors inside the container, SIGTERM drained within the
// promise with /v1/health no longer 200; the root variant by default and
// with writable cgroups. Every container and image it makes is removed.
// CORRAL_HEAVY=1, root, podman, runc and mmdebstrap (and npm and Node 20.18.1
// or later for the e2b SDK); skipped with the reason otherwise, failed under
// CORRAL_REQUIRE_PODMAN=1.
func TestContainerImage(t *testing.T) {
	image := containerImage(t)
	id := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())

	t.Run("Size", func(t *testing.T) {
		size, err := strconv.ParseInt(mustPodman(t, "image", "inspect", "--format", "{{.Size}}", image+":corral"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("image size (non-root target, uncompressed): %.1f MB (corral and corral-server %.1f MB; the base before the Containerfile trims it %.1f MB)",
			float64(size)/1e6, float64(built.binBytes)/1e6, float64(built.baseBytes)/1e6)
		if size > maxImageBytes {
			t.Errorf("the image is %.1f MB uncompressed, over the promised %.0f MB", float64(size)/1e6, float64(maxImageBytes)/1e6)
		}
	})

	t.Run("Default", func(t *testing.T) {
		const pidsLimit = 256 // the container's own pids.max: the fork bomb's bound here
		c := runContainer(t, image, "corral", []string{"--pids-limit", strconv.Itoa(pidsLimit)}, "--grace", "1")
		startedAt := containerStartedAt(t, c.name)
		t.Logf("podman run to a healthy /v1/health: %v (corral's share, from the container's start: %v)",
			c.healthy.Sub(c.started).Round(time.Millisecond), c.healthy.Sub(startedAt).Round(time.Millisecond))
		floor := podmanRunFloor(t, image+":corral")
		t.Logf("podman's own floor in the same run: podman run -d of true in the same image, same flags: %v; corral above it: %v",
			floor.Round(time.Millisecond), (c.healthy.Sub(c.started) - floor).Round(time.Millisecond))

		// A non-root container cannot make cgroups: the pgroup tier.
		if tier, report := usedTier(t, c.name); tier != "pgroup" {
			t.Errorf("corral doctor in a default container uses %s, want pgroup:\n%s", tier, report)
		}
		resp, err := c.client.Execute(t.Context(), &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
			Command: []string{"sh", "-c", "echo hi; id -u; pwd"}}})
		if err != nil || string(resp.GetStdout()) != "hi\n10001\n/workspace\n" {
			t.Errorf("Execute in the container: %q %v, want hi, uid 10001, /workspace", resp.GetStdout(), err)
		}
		t.Run("E2B", func(t *testing.T) { e2bInContainer(t, c) })
		t.Run("EscapeBattery", func(t *testing.T) { escapeBattery(t, c, id) })
		t.Run("ForkBomb", func(t *testing.T) {
			before := pidsEvents(t, c.name)
			forkBomb(t, c, "corral-bomb-"+id)
			if after := pidsEvents(t, c.name); after <= before {
				t.Errorf("the container's pids.max (%d) refused no fork (events %d, then %d): the bomb was not bounded by it", pidsLimit, before, after)
			}
			// corral itself still serves.
			if resp, err := c.client.Execute(t.Context(), &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
				Command: []string{"echo", "alive"}}}); err != nil || string(resp.GetStdout()) != "alive\n" {
				t.Errorf("after the bomb: %q %v", resp.GetStdout(), err)
			}
		})
		t.Run("SIGTERM", func(t *testing.T) { drain(t, c, image, 1*time.Second) })
	})

	t.Run("Root", func(t *testing.T) {
		// podman's default for a root container: its cgroups mounted
		// read-only at the container's own path (cgroup v1 here: the host's
		// cgroup namespace), so corral cannot make a containment there and
		// uses the pgroup tier.
		c := runContainer(t, image, "corral-root", nil, "--run-as", "sandbox", "--grace", "1")
		tier, report := usedTier(t, c.name)
		v := cgroupVersion(t)
		t.Logf("a default root container (podman's cgroups %s): tier %s", v, tier)
		if v == "v1" && tier != "pgroup" {
			t.Errorf("corral doctor in a default root container on cgroup v1 uses %s, want pgroup (read-only cgroup mounts):\n%s", tier, report)
		}
		escapeBattery(t, c, id+"-root")

		// With writable cgroups (a private cgroup namespace and
		// --privileged, which mounts them read-write), the root variant gets
		// a cgroup tier, and corral's own pids limit bounds a fork bomb
		// below the container's.
		const corralPids, podmanPids = 64, 512
		w := runContainer(t, image, "corral-root", []string{"--privileged", "--cgroupns", "private", "--pids-limit", strconv.Itoa(podmanPids)},
			"--run-as", "sandbox", "--grace", "1", "--pids-max", strconv.Itoa(corralPids))
		want := "cgroup1"
		if v != "v1" {
			want = "cgroup2"
		}
		if tier, report := usedTier(t, w.name); tier != want {
			t.Errorf("corral doctor in a root container with writable cgroups uses %s, want %s:\n%s", tier, want, report)
		}
		resp, err := w.client.Execute(t.Context(), &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"id", "-u"}}})
		if err != nil || string(resp.GetStdout()) != "10002\n" {
			t.Errorf("--run-as sandbox: id -u %q %v, want 10002", resp.GetStdout(), err)
		}
		before := pidsEvents(t, w.name)
		resp = forkBomb(t, w, "corral-bomb-root-"+id)
		if note := fmt.Sprintf("the process limit (%d tasks) was reached", corralPids); resp == nil || !strings.Contains(string(resp.GetStderr()), note) {
			t.Errorf("fork bomb under --pids-max %d: stderr %q, want %q", corralPids, tailOf(resp.GetStderr()), note)
		}
		if after := pidsEvents(t, w.name); after != before {
			t.Errorf("the container's pids.max (%d) refused forks (%d, then %d): corral's limit (%d) did not hold first", podmanPids, before, after, corralPids)
		}
		escapeBattery(t, w, id+"-cgroup")
	})
}

func tailOf(b []byte) string { return string(b[max(0, len(b)-300):]) }

// containerStartedAt is when podman says the container's process started.
func containerStartedAt(t *testing.T, name string) time.Time {
	t.Helper()
	ns, err := strconv.ParseInt(mustPodman(t, "inspect", "--format", "{{.State.StartedAt.UnixNano}}", name), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns)
}

// drain sends SIGTERM to the container while a job that ignores SIGTERM
// runs, and checks the promise: corral exits 0 within --grace + 2 s (plus
// podman's own time to stop a container, measured here), the job's Start
// stream ends, and /v1/health never answers 200 again once the drain began
// (the REST face stops accepting: a probe's connection is refused).
func drain(t *testing.T, c *container, image string, grace time.Duration) {
	t.Helper()
	floor := stopFloor(t, image)
	st, err := c.client.Start(t.Context(), &processv1.StartRequest{Config: &processv1.ProcessConfig{
		Command: []string{"sh", "-c", "trap '' TERM; echo up; while :; do sleep 1; done"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := st.Recv(); err != nil || ev.GetInit() == nil {
		t.Fatalf("%v %v, want init", ev, err)
	}
	if ev, err := st.Recv(); err != nil || string(ev.GetStdout()) != "up\n" {
		t.Fatalf("%v %v, want up", ev, err)
	}
	streamEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				streamEnded <- err
				return
			}
		}
	}()
	stop := time.Now()
	mustPodman(t, "kill", "--signal", "TERM", c.name)
	probes := make(chan []int, 1)
	exited := make(chan struct{})
	go func() {
		var seen []int
		for {
			select {
			case <-exited:
				probes <- seen
				return
			default:
			}
			code, _ := healthCode(c.rest)
			if len(seen) == 0 || seen[len(seen)-1] != code {
				seen = append(seen, code)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	mustPodman(t, "wait", c.name)
	took := time.Since(stop)
	close(exited)
	seen := <-probes
	code := mustPodman(t, "inspect", "--format", "{{.State.ExitCode}}", c.name)
	bound := grace + serveShutdownSlack + floor + time.Second // a second of slack for a loaded machine
	if code != "0" || took > bound {
		t.Errorf("SIGTERM: exit %s after %v, want 0 within --grace %v + %v + podman's stop floor %v + 1 s", code, took, grace, serveShutdownSlack, floor)
	}
	if took < grace {
		t.Errorf("exited %v after SIGTERM: the job that ignores SIGTERM got less than --grace %v", took, grace)
	}
	// At most one 200 (a probe answered before corral took the signal),
	// and only first.
	for i, code := range seen {
		if code == 200 && i > 0 {
			t.Errorf("/v1/health answered 200 after the drain began: %v", seen)
		}
	}
	select {
	case err := <-streamEnded:
		t.Logf("the Start stream ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Error("the Start stream did not end with the container")
	}
	t.Logf("SIGTERM to exit, a job ignoring SIGTERM running: %v (podman's stop floor %v; /v1/health during the drain: %v)",
		took.Round(time.Millisecond), floor.Round(time.Millisecond), seen)
}

// stopFloor is podman's own time to stop a container whose process exits
// at once on SIGTERM: podman kill and podman wait.
func stopFloor(t *testing.T, image string) time.Duration {
	t.Helper()
	name := fmt.Sprintf("corral-floor-%d-%d", os.Getpid(), time.Now().UnixNano())
	args := append([]string{"run", "-d", "--name", name}, runLimits...)
	mustPodman(t, append(args, "--entrypoint", "/bin/sh", image+":corral", "-c", "trap 'exit 0' TERM; echo up; while :; do sleep 0.05; done")...)
	defer podman(t, "rm", "-f", "-t", "0", name)
	for out, _ := podman(t, "logs", name); out != "up"; out, _ = podman(t, "logs", name) {
		time.Sleep(10 * time.Millisecond)
	}
	begin := time.Now()
	mustPodman(t, "kill", "--signal", "TERM", name)
	mustPodman(t, "wait", name)
	return time.Since(begin)
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
