package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// entrypointEnv is the environment that runs entrypoint.sh with the corral
// built from this tree first on PATH.
func entrypointEnv(bin string, extra ...string) []string {
	env := []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PATH=") {
			env = append(env, e)
		}
	}
	return append(env, extra...)
}

// TestEntrypointExecsCorral: where there is no cgroup2 mount to prepare,
// the entrypoint only execs corral with its arguments, and corral's exit
// status is the container's.
func TestEntrypointExecsCorral(t *testing.T) {
	t.Parallel()
	bin := corral(t)
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"version"}, 0, "corral "},                      // arguments reach corral
		{[]string{"serve", "--no-such-flag"}, 2, "no-such-flag"}, // and so does its exit status
	} {
		cmd := exec.Command("./entrypoint.sh", tc.args...)
		cmd.Env = entrypointEnv(bin, "CORRAL_CGROUP_FS="+t.TempDir())
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.out) {
			t.Errorf("entrypoint.sh %q: exit %d, output %q; want exit %d and %q", tc.args, code, out, tc.code, tc.out)
		}
	}
}

// v2Mount returns the cgroup2 mount whose root is the hierarchy's root, as
// killtree finds it, or "".
func v2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fs, gs := strings.Fields(pre), strings.Fields(post)
		if ok && len(fs) >= 5 && len(gs) >= 1 && gs[0] == "cgroup2" && fs[3] == "/" {
			return fs[4]
		}
	}
	return ""
}

// TestEntrypointCgroupNamespace runs the image's start the way a container
// with its own cgroup namespace sees it: a fresh cgroup made the root of a
// new cgroup namespace, cgroup2 mounted alone on /sys/fs/cgroup in a new
// mount namespace. Writable (the privileged sandbox-cgroup2.yaml pod), the
// entrypoint must move every process out of the namespace's root and corral
// doctor must choose cgroup2 there; read-only (the root image in a pod that
// is not privileged), the entrypoint must leave things as they are and
// doctor must fall back to pgroup, saying why. Root only; needs unshare(1)
// and mount(8).
func TestEntrypointCgroupNamespace(t *testing.T) {
	bin := corral(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes a cgroup and mounts cgroup2")
	}
	v2 := v2Mount()
	if v2 == "" {
		t.Skip("no cgroup2 mount")
	}
	for _, tool := range []string{"unshare", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	ep, err := filepath.Abs("entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name  string
		mount string   // cgroup2 mount options
		want  []string // regexps doctor's output and the report must match
	}{
		// A privileged container: the root is emptied, cgroup2 is chosen.
		{"writable", "rw", []string{`(?m)^cgroup2\s+yes\s+yes\s+cgroup2 at /sys/fs/cgroup\b`,
			`(?m)^ROOTPROCS=\s*$`, `(?m)^SUPERVISOR=yes$`}},
		// An unprivileged one: nothing moves, pgroup is chosen and doctor says why.
		{"read-only", "ro", []string{`(?m)^cgroup2\s+no\s+no\s+cannot create a leaf .*read-only file system`,
			`(?m)^pgroup\s+yes\s+yes\s`, `(?m)^ROOTPROCS=\d`, `(?m)^SUPERVISOR=$`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := filepath.Join(v2, fmt.Sprintf("corral-deploy-test-%d-%d", os.Getpid(), i))
			if err := os.Mkdir(cg, 0o755); err != nil {
				t.Skipf("cannot make a cgroup: %v", err)
			}
			t.Cleanup(func() { removeCgroupTree(t, cg) })
			out := inCgroupNamespace(t, bin, ep, cg, tc.mount)
			for _, re := range tc.want {
				if !regexp.MustCompile(re).MatchString(out) {
					t.Errorf("output does not match %s", re)
				}
			}
		})
	}
}

// inCgroupNamespace runs the entrypoint (with doctor) in cgroup cg made the
// root of a new cgroup namespace, with cgroup2 mounted on /sys/fs/cgroup
// with the options opts, and returns its output followed by what the
// namespace's root cgroup holds afterwards (ROOTPROCS=) and whether the
// supervisor cgroup exists (SUPERVISOR=yes).
func inCgroupNamespace(t *testing.T, bin, ep, cg, opts string) string {
	t.Helper()
	// The outer shell moves itself into cg, then becomes the new
	// namespaces' first process; the inner one mounts, runs the entrypoint
	// as the container runtime would, then reports.
	inner := `umount -R /sys/fs/cgroup && mount -t cgroup2 -o "$OPTS" cgroup2 /sys/fs/cgroup || exit 97
grep -qx '0::/' /proc/self/cgroup || exit 98
"$EP" doctor
echo "ROOTPROCS=$(tr '\n' ' ' </sys/fs/cgroup/cgroup.procs)"
echo "SUPERVISOR=$(test -d /sys/fs/cgroup/supervisor && echo yes)"`
	outer := `echo $$ >"$CG/cgroup.procs" || exit 96
exec unshare --cgroup --mount --propagation private bash -c "$INNER"`
	cmd := exec.Command("bash", "-c", outer)
	cmd.Env = entrypointEnv(bin, "CG="+cg, "EP="+ep, "INNER="+inner, "OPTS="+opts, "CORRAL_CONTAINMENT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 96 {
			t.Skipf("cannot emulate the container here (exit %d): %s", ee.ExitCode(), out)
		}
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("\n%s", out)
	return string(out)
}

// removeCgroupTree removes cg and the cgroups under it, children first. By
// the time it runs every process that lived in them has exited.
func removeCgroupTree(t *testing.T, cg string) {
	var dirs []string
	filepath.WalkDir(cg, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil {
			t.Errorf("remove cgroup %s: %v", dirs[i], err)
		}
	}
}
