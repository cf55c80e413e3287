package deploy

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// agentSandboxKinds are the agent-sandbox v1.0.1 types deploy/agent-sandbox
// holds.
var agentSandboxKinds = map[schema.GroupVersionKind]func() any{
	{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxTemplate"}: func() any { return new(extv1beta1.SandboxTemplate) },
	{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxWarmPool"}: func() any { return new(extv1beta1.SandboxWarmPool) },
}

func init() {
	for k, v := range agentSandboxKinds {
		kinds[k] = v
	}
}

// TestAgentSandboxManifests decodes deploy/agent-sandbox strictly into
// agent-sandbox's own types and checks what the SDKs rely on: sandboxd's
// ports, the discovery variables, the root, loopback without a token on
// the command line, and a warm pool that names the template.
func TestAgentSandboxManifests(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("agent-sandbox/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("want a template and a warm pool in agent-sandbox/: %v %v", files, err)
	}
	templates := map[string]*extv1beta1.SandboxTemplate{}
	var pools []*extv1beta1.SandboxWarmPool
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeStrict(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			switch o := o.(type) {
			case *extv1beta1.SandboxTemplate:
				templates[o.Name] = o
			case *extv1beta1.SandboxWarmPool:
				pools = append(pools, o)
			default:
				t.Errorf("%s: unexpected %T", f, o)
			}
		}
	}
	if len(templates) == 0 || len(pools) == 0 {
		t.Fatalf("%d templates, %d warm pools; want both", len(templates), len(pools))
	}
	for _, p := range pools {
		if templates[p.Spec.TemplateRef.Name] == nil {
			t.Errorf("warm pool %s names template %q, which is not in agent-sandbox/", p.Name, p.Spec.TemplateRef.Name)
		}
	}
	for name, tmpl := range templates {
		spec := &tmpl.Spec.PodTemplate.Spec
		if len(spec.Containers) != 1 {
			t.Fatalf("template %s: %d containers, want 1", name, len(spec.Containers))
		}
		for _, err := range checkSandboxdContainer(spec, &spec.Containers[0]) {
			t.Errorf("template %s: %v", name, err)
		}
	}
}

// checkSandboxdContainer returns the promises the container breaks.
func checkSandboxdContainer(spec *corev1.PodSpec, c *corev1.Container) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	s, err := parseServe(c.Args)
	if err != nil {
		return []error{err}
	}
	if err := s.checkNoTokenOnCommandLine(); err != nil {
		fail("%v", err)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for _, f := range []struct{ flag, port, envName string }{
		{"sandboxd", "9090", "SANDBOXD_GRPC_ADDR"},
		{"sandboxd-rest", "8080", "SANDBOXD_REST_ADDR"},
	} {
		host, port, err := net.SplitHostPort(s.flags[f.flag])
		if err != nil || port != f.port {
			fail("--%s %q, want sandboxd's port %s", f.flag, s.flags[f.flag], f.port)
		}
		// The SDKs send no token: without one, corral serves loopback only.
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			fail("--%s %q is not loopback: corral refuses it without a token, and the SDKs send none", f.flag, s.flags[f.flag])
		}
		if _, p, _ := net.SplitHostPort(env[f.envName]); p != f.port {
			fail("%s=%q, want the port of --%s (%s)", f.envName, env[f.envName], f.flag, f.port)
		}
	}
	root := s.flags["root-dir"]
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath == root
	}
	if root == "" || !mounted {
		fail("--root-dir %q is not a mounted volume", root)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		fail("the pod does not insist on a non-root user")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		fail("the sandbox mounts a service account token: agent code would get API access")
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.Exec == nil {
			fail("want exec probes (the kubelet probes the pod IP, where nothing listens)")
		}
	}
	return errs
}

// TestAgentSandboxProbe runs the template's readiness probe command against
// a running corral, its port changed to that corral's REST port: it must
// succeed there and fail where nothing listens.
func TestAgentSandboxProbe(t *testing.T) {
	data, err := os.ReadFile("agent-sandbox/sandboxtemplate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStrict(data)
	if err != nil {
		t.Fatal(err)
	}
	probe := objs[0].(*extv1beta1.SandboxTemplate).Spec.PodTemplate.Spec.Containers[0].ReadinessProbe.Exec.Command
	sd := startSandboxd(t)
	_, port, _ := net.SplitHostPort(sd.rest)
	run := func(p string) error {
		args := append([]string(nil), probe...)
		args[len(args)-1] = strings.ReplaceAll(args[len(args)-1], "/8080", "/"+p)
		return exec.Command(args[0], args[1:]...).Run()
	}
	if err := run(port); err != nil {
		t.Errorf("probe against a healthy corral: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, free, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	if err := run(free); err == nil {
		t.Error("probe succeeded where nothing listens")
	}
}
