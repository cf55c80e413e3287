package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The names the manifests and deploy/README.md share.
const (
	httpPort      = 7823
	tokenSecret   = "corral-token"
	tokenKey      = "token"
	tokenEnvName  = "CORRAL_TOKEN"
	healthPath    = "/healthz"
	sandboxLabel  = "app.kubernetes.io/component"
	sandboxValue  = "sandbox"
	manifestsGlob = "k8s/*.yaml"
)

// kinds are the object types a manifest may hold, by apiVersion and kind.
var kinds = map[schema.GroupVersionKind]func() any{
	{Version: "v1", Kind: "Pod"}:                                       func() any { return new(corev1.Pod) },
	{Version: "v1", Kind: "Service"}:                                   func() any { return new(corev1.Service) },
	{Group: "apps", Version: "v1", Kind: "Deployment"}:                 func() any { return new(appsv1.Deployment) },
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}: func() any { return new(networkingv1.NetworkPolicy) },
	{Group: "apps", Version: "v1", Kind: "StatefulSet"}:                func() any { return new(appsv1.StatefulSet) },
}

// decodeStrict decodes every YAML document of data into its k8s.io/api type,
// refusing unknown and duplicate fields and unknown kinds.
func decodeStrict(data []byte) ([]any, error) {
	var objs []any
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		mk := kinds[gv.WithKind(tm.Kind)]
		if mk == nil {
			return nil, fmt.Errorf("document %d: unknown kind %s %q", i, tm.APIVersion, tm.Kind)
		}
		obj := mk()
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
}

// stripComments drops the comment lines of a YAML document.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// TestDecodeStrictRefuses shows the decoder is strict: each row is a
// mistake a lenient decoder would let through.
func TestDecodeStrictRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc string }{
		// a misspelt field
		{"unknown field", "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    imagee: x\n"},
		// a field given twice
		{"duplicate field", "apiVersion: v1\nkind: Pod\nspec:\n  terminationGracePeriodSeconds: 1\n  terminationGracePeriodSeconds: 2\n"},
		// a field of the wrong type
		{"wrong type", "apiVersion: v1\nkind: Pod\nspec:\n  terminationGracePeriodSeconds: soon\n"},
		// a kind the table does not know
		{"unknown kind", "apiVersion: v1\nkind: Pood\n"},
		// a probe field in the wrong place
		{"misplaced field", "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    httpGet: {path: /healthz}\n"},
	} {
		if _, err := decodeStrict([]byte(tc.doc)); err == nil {
			t.Errorf("%s: decoded without error", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

// manifests decodes every file of k8s/.
func manifests(t *testing.T) map[string][]any {
	t.Helper()
	files, err := filepath.Glob(manifestsGlob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestsGlob, err)
	}
	out := map[string][]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeStrict(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(objs) == 0 {
			t.Errorf("%s: no object", f)
		}
		out[f] = objs
	}
	return out
}

// podSpec returns the pod spec of obj, or nil.
func podSpec(obj any) (*corev1.PodSpec, *corev1.PodTemplateSpec) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.Spec, &corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec}
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec, &o.Spec.Template
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec, &o.Spec.Template
	}
	return nil, nil
}

// corralContainer is a container that runs `corral serve`.
type corralContainer struct {
	c     *corev1.Container
	serve serveArgs
}

// corralContainers finds the corral containers of spec: the main ones and
// the native sidecars (init containers with restartPolicy Always). A plain
// init container running corral would block the pod's start: an error.
func corralContainers(spec *corev1.PodSpec) ([]corralContainer, error) {
	var out []corralContainer
	add := func(c *corev1.Container, sidecar bool) error {
		if len(c.Args) == 0 || c.Args[0] != "serve" {
			return nil
		}
		if !sidecar {
			return fmt.Errorf("init container %s runs corral serve without restartPolicy Always: the pod would never start", c.Name)
		}
		s, err := parseServe(c.Args)
		if err != nil {
			return fmt.Errorf("container %s: %w", c.Name, err)
		}
		out = append(out, corralContainer{c: c, serve: s})
		return nil
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if err := add(c, sidecar); err != nil {
			return nil, err
		}
	}
	for i := range spec.Containers {
		if err := add(&spec.Containers[i], true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TestManifestPromises checks, for every pod of k8s/, what deploy/README.md
// says of it.
func TestManifestPromises(t *testing.T) {
	t.Parallel()
	pods := 0
	for file, objs := range manifests(t) {
		for _, obj := range objs {
			spec, tmpl := podSpec(obj)
			if spec == nil {
				continue
			}
			pods++
			cs, err := corralContainers(spec)
			if err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			if len(cs) != 1 {
				t.Errorf("%s: %d containers run corral serve, want 1 (one corral per sandbox)", file, len(cs))
				continue
			}
			if tmpl.Labels[sandboxLabel] != sandboxValue {
				t.Errorf("%s: pod lacks the label %s=%s that networkpolicy.yaml selects", file, sandboxLabel, sandboxValue)
			}
			for _, err := range checkPod(spec, cs[0]) {
				t.Errorf("%s: %v", file, err)
			}
		}
	}
	if pods == 0 {
		t.Fatal("no pod in the manifests")
	}
}

// checkPod returns every promise the pod spec breaks.
func checkPod(spec *corev1.PodSpec, cc corralContainer) []error {
	var errs []error
	c, s := cc.c, cc.serve
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(c.Name+": "+format, a...)) }

	// Listening where the probes and the control plane reach it.
	host, port, err := net.SplitHostPort(s.flags["listen"])
	switch {
	case err != nil:
		fail("--listen %q: %v", s.flags["listen"], err)
	case host != "0.0.0.0":
		fail("--listen %s: the kubelet probes the pod's IP; listen on 0.0.0.0", s.flags["listen"])
	case port != strconv.Itoa(httpPort):
		fail("--listen %s: want port %d", s.flags["listen"], httpPort)
	}
	if !hasPort(c, "http", httpPort) {
		fail("no containerPort %d named http", httpPort)
	}

	// Readiness and liveness on /healthz, which needs no token.
	for name, p := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			fail("%s: want an httpGet probe", name)
			continue
		}
		if p.HTTPGet.Path != healthPath {
			fail("%s: path %q, want %s", name, p.HTTPGet.Path, healthPath)
		}
		if !probePort(c, p.HTTPGet.Port.String(), httpPort) {
			fail("%s: port %s is not %d", name, p.HTTPGet.Port.String(), httpPort)
		}
	}

	// The token from a Secret, never on the command line.
	if err := s.checkNoTokenOnCommandLine(); err != nil {
		fail("%v", err)
	}
	if _, ok := s.flags["token-file"]; ok {
		fail("--token-file: a Secret volume's files are symlinks owned by root, which --token-file refuses; use $%s", tokenEnvName)
	}
	if !tokenFromSecret(c) {
		fail("$%s must come from secretKeyRef %s/%s", tokenEnvName, tokenSecret, tokenKey)
	}

	// A grace period longer than the drain.
	drain, err := s.drain()
	if err != nil {
		fail("%v", err)
	}
	switch g := spec.TerminationGracePeriodSeconds; {
	case g == nil:
		fail("terminationGracePeriodSeconds unset: set it against --grace")
	case time.Duration(*g)*time.Second < drain+closeHeadroom:
		fail("terminationGracePeriodSeconds %d < drain %v + %v", *g, drain, closeHeadroom)
	}

	// Resources and the API token.
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		fail("resources.requests needs cpu and memory")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		errs = append(errs, errors.New("automountServiceAccountToken must be false: commands read every file of the container"))
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		errs = append(errs, errors.New("enableServiceLinks must be false: commands need no other Service's address in their environment"))
	}

	// The containment tier the pod asks for.
	errs = append(errs, checkTier(spec, c, s)...)
	return errs
}

// checkTier: a privileged container runs the root image and --run-as; any
// other runs as non-root without privilege escalation (the pgroup tier).
func checkTier(spec *corev1.PodSpec, c *corev1.Container, s serveArgs) []error {
	var errs []error
	sc := c.SecurityContext
	if sc != nil && sc.Privileged != nil && *sc.Privileged {
		if _, ok := s.flags["run-as"]; !ok {
			errs = append(errs, fmt.Errorf("%s: privileged without --run-as: commands would run as root", c.Name))
		}
		if sc.RunAsUser == nil || *sc.RunAsUser != 0 || !strings.HasSuffix(c.Image, ":root") {
			errs = append(errs, fmt.Errorf("%s: the cgroup2 variant runs the corral-root image (a :root tag) as uid 0", c.Name))
		}
		return errs
	}
	nonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	if sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot {
		errs = append(errs, fmt.Errorf("%s: not privileged, so runAsNonRoot: true (the default image)", c.Name))
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		errs = append(errs, fmt.Errorf("%s: allowPrivilegeEscalation must be false", c.Name))
	}
	if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
		errs = append(errs, fmt.Errorf("%s: capabilities must drop ALL and add none", c.Name))
	}
	var seccomp *corev1.SeccompProfile
	if sc != nil {
		seccomp = sc.SeccompProfile
	}
	if seccomp == nil && spec.SecurityContext != nil {
		seccomp = spec.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		errs = append(errs, fmt.Errorf("%s: want the RuntimeDefault seccomp profile", c.Name))
	}
	return errs
}

func hasPort(c *corev1.Container, name string, port int32) bool {
	for _, p := range c.Ports {
		if p.Name == name && p.ContainerPort == port {
			return true
		}
	}
	return false
}

// probePort reports whether a probe's port (a name or a number) is port.
func probePort(c *corev1.Container, v string, port int32) bool {
	if n, err := strconv.Atoi(v); err == nil {
		return int32(n) == port
	}
	for _, p := range c.Ports {
		if p.Name == v {
			return p.ContainerPort == port
		}
	}
	return false
}

func tokenFromSecret(c *corev1.Container) bool {
	for _, e := range c.Env {
		if e.Name != tokenEnvName {
			continue
		}
		ref := e.ValueFrom
		return e.Value == "" && ref != nil && ref.SecretKeyRef != nil &&
			ref.SecretKeyRef.Name == tokenSecret && ref.SecretKeyRef.Key == tokenKey &&
			(ref.SecretKeyRef.Optional == nil || !*ref.SecretKeyRef.Optional)
	}
	return false
}

// TestNetworkPolicy checks that the policy admits the control plane to
// corral's port on the pods the manifests label as sandboxes.
func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	found := false
	for file, objs := range manifests(t) {
		for _, obj := range objs {
			np, ok := obj.(*networkingv1.NetworkPolicy)
			if !ok {
				continue
			}
			found = true
			if np.Spec.PodSelector.MatchLabels[sandboxLabel] != sandboxValue {
				t.Errorf("%s: selects %v, not the sandbox pods", file, np.Spec.PodSelector.MatchLabels)
			}
			open := false
			for _, rule := range np.Spec.Ingress {
				for _, p := range rule.Ports {
					if p.Port != nil && p.Port.IntValue() == httpPort && len(rule.From) > 0 {
						open = true
					}
				}
			}
			if !open {
				t.Errorf("%s: no ingress rule admits a named peer to port %d", file, httpPort)
			}
		}
	}
	if !found {
		t.Fatal("no NetworkPolicy in the manifests")
	}
}
