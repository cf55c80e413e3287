package proctest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// startSafe starts helper name inside s with the marker; stdout goes to a pipe.
func startSafe(t *testing.T, s *Safety, marker, name string, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	argv, env := Argv(name, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), env, marker)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	if err := s.Start(cmd); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { r.Close() })
	return cmd, bufio.NewReader(r)
}

// safetyPaths returns the cgroup paths a process inside s shows in /proc/<pid>/cgroup, keyed
// like ownCgroups, for the hierarchies s uses.
func safetyPaths(s *Safety) map[string]string {
	want := map[string]string{}
	for _, c := range s.v1 {
		want[c.controller] = "/" + s.Name()
	}
	if s.v2 != "" {
		want[""] = "/" + s.Name()
	}
	return want
}

// TestSafeStart checks that a child started by Start is in every safety cgroup from the start,
// that the starting thread went back, and that the cleanup kills it and removes the cgroups.
func TestSafeStart(t *testing.T) {
	t.Parallel()
	entry, value := Marker(t)
	var cmd *exec.Cmd
	var roots []string
	t.Run("inside", func(t *testing.T) {
		s := Safe(t, 50)
		roots = s.roots()
		var out *bufio.Reader
		cmd, out = startSafe(t, s, entry, "ignoreterm", "30")
		// Its "ready" read before the subtest's cleanup closes the pipe:
		// written after that, it would die of SIGPIPE, not of the cleanup.
		if line, err := out.ReadString('\n'); line != "ready\n" {
			t.Fatalf("helper said %q, %v", line, err)
		}
		got, err := ownCgroups("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		want := safetyPaths(s)
		for k := range got {
			if _, ok := want[k]; !ok {
				delete(got, k)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("child cgroups (-want +got):\n%s", diff)
		}
		if n, err := s.Current(); err != nil || n < 1 {
			t.Errorf("Current() = %d, %v; want at least the child", n, err)
		}
		// No thread of ours stayed behind.
		tasks, _ := filepath.Glob("/proc/self/task/*/cgroup")
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), s.Name()) {
				t.Errorf("%s: %s", f, b)
			}
		}
	})
	if cmd == nil {
		return // Skipped: no cgroups.
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("child ended with %v, want SIGKILL from the cleanup", err)
	}
	for _, r := range roots {
		if _, err := os.Stat(r); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", r, err)
		}
	}
	NoSurvivors(t, value, time.Second)
}

// TestSafeNested checks that the cleanup also empties and removes cgroups nested inside the
// safety cgroups, as the code under test makes them.
func TestSafeNested(t *testing.T) {
	t.Parallel()
	entry, value := Marker(t)
	var cmd *exec.Cmd
	var nested []string
	t.Run("inside", func(t *testing.T) {
		s := Safe(t, 50)
		cmd, _ = startSafe(t, s, entry, "sleep", "30")
		for _, root := range s.roots() {
			dir := filepath.Join(root, "cmd-1", "deeper")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			nested = append(nested, dir)
			if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
				t.Fatal(err)
			}
		}
		if s.freezer != "" { // A frozen nested cgroup must not keep the killed child in D state.
			if err := writeFile(filepath.Join(s.freezer, "cmd-1", "deeper", "freezer.state"), "FROZEN"); err != nil {
				t.Fatal(err)
			}
		}
	})
	if cmd == nil {
		return
	}
	if err := cmd.Wait(); err == nil {
		t.Error("child exited cleanly, want killed")
	}
	for _, d := range nested {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", d, err)
		}
	}
	NoSurvivors(t, value, time.Second)
}

// TestSafeBomb runs a bounded bomb with a long lifetime inside a safety cgroup, sees it grow
// through Current and Survivors, and checks that the cleanup, not the deadline, ends it.
func TestSafeBomb(t *testing.T) {
	t.Parallel()
	entry, value := Marker(t)
	var cmd *exec.Cmd
	t.Run("inside", func(t *testing.T) {
		s := Safe(t, 300)
		var out *bufio.Reader
		cmd, out = startSafe(t, s, entry, "bomb", "30", "plain", "200")
		line, err := out.ReadString('\n')
		if err != nil || line != "ready 4\n" {
			t.Fatalf("bomb root said %q, %v; want ready 4", line, err)
		}
		// Wait, up to 20 s on a loaded machine, for the tree to pass 20 processes.
		var procs []Proc
		for end := time.Now().Add(20 * time.Second); len(procs) < 20 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
			procs = Survivors(value)
		}
		n, err := s.Current()
		t.Logf("bomb: %d processes, pids.current %d", len(procs), n)
		if len(procs) < 20 || err != nil || n < len(procs) || n > 300 {
			t.Errorf("bomb: %d processes, pids.current %d (%v); want at least 20 and pids.current in [processes, 300]", len(procs), n, err)
		}
	})
	if cmd == nil {
		return
	}
	if err := cmd.Wait(); err == nil {
		t.Error("bomb root exited cleanly, want killed")
	}
	if left := Survivors(value); len(left) > 0 {
		t.Errorf("%d bomb processes survived the cleanup, first %v", len(left), left[0])
	}
	NoSurvivors(t, value, time.Second)
}

func TestParseMountinfo(t *testing.T) {
	t.Parallel()
	const mountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 /sub /elsewhere/pids rw - cgroup cgroup rw,freezer
41 31 0:38 / /sys/fs/cgroup/uni\040fied rw,relatime - cgroup2 cgroup2 rw
`
	got := parseMountinfo(bufio.NewScanner(strings.NewReader(mountinfo)))
	want := cgroupMounts{
		v1: map[string]string{
			"cpu":     "/sys/fs/cgroup/cpu,cpuacct", // co-mounted controllers share a mount
			"cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
			"pids":    "/sys/fs/cgroup/pids",
			// freezer is mounted from a subdirectory only, so it does not count.
		},
		v2: "/sys/fs/cgroup/uni fied", // octal escape undone
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(cgroupMounts{})); diff != "" {
		t.Errorf("parseMountinfo (-want +got):\n%s", diff)
	}
}

// TestBombModes checks the session layout of each bomb mode on a 9-process bounded bomb: plain
// stays in the root's session, setsid makes every non-root process a session leader, dfork
// leaves every non-root process reparented away from the tree and not a session leader.
func TestBombModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"plain", "setsid", "dfork"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			entry, value := Marker(t)
			var cmd *exec.Cmd
			t.Run("inside", func(t *testing.T) {
				s := Safe(t, 200)
				var out *bufio.Reader
				cmd, out = startSafe(t, s, entry, "bomb", "30", mode, "9")
				if line, err := out.ReadString('\n'); line != "ready 4\n" {
					t.Fatalf("root said %q, %v", line, err)
				}
				// Poll until the tree is complete and dfork's middle processes have exited.
				var procs []Proc
				var err error = errors.New("no scan yet")
				for end := time.Now().Add(20 * time.Second); err != nil && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
					procs = Survivors(value)
					err = bombLayout(mode, cmd.Process.Pid, procs)
				}
				if err != nil {
					t.Errorf("%v\nprocesses: %v", err, procs)
				}
			})
			if cmd != nil {
				cmd.Wait() //nolint:errcheck // Killed by the cleanup; TestSafeBomb checks how.
			}
			NoSurvivors(t, value, time.Second)
		})
	}
}

// bombLayout checks a 9-process bomb tree of the given mode rooted at root.
func bombLayout(mode string, root int, procs []Proc) error {
	if len(procs) != 9 {
		return fmt.Errorf("%d processes, want 9", len(procs))
	}
	inTree := map[int]bool{}
	for _, p := range procs {
		inTree[p.PID] = true
	}
	rootSid, _ := unix.Getsid(root)
	for _, p := range procs {
		if p.PID == root {
			continue
		}
		sid, err := unix.Getsid(p.PID)
		if err != nil {
			return fmt.Errorf("getsid %d: %w", p.PID, err)
		}
		switch {
		case mode == "plain" && (sid != rootSid || !inTree[p.PPID]):
			return fmt.Errorf("plain: %v has sid %d, parent in tree %v; want root's sid %d", p, sid, inTree[p.PPID], rootSid)
		case mode == "setsid" && (sid != p.PID || !inTree[p.PPID]):
			return fmt.Errorf("setsid: %v has sid %d; want its own, parent in tree", p, sid)
		case mode == "dfork" && (sid == p.PID || sid == rootSid || inTree[p.PPID]):
			return fmt.Errorf("dfork: %v has sid %d (root %d), parent in tree %v; want a dead leader's session, reparented", p, sid, rootSid, inTree[p.PPID])
		}
	}
	return nil
}

// TestSweepStale: a safety cgroup whose test process is gone (here: made
// under the name of a process that then died, as a test binary killed by
// -timeout leaves it, with a stopped process inside that can never expire)
// is killed and removed by the next Safe; one of a live owner is not.
func TestSweepStale(t *testing.T) {
	dead := exec.Command("sleep", "60")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	tag := ownerTag(dead.Process.Pid)
	dead.Process.Kill()
	dead.Wait()
	if tag == "" || ownerTag(os.Getpid()) == "" {
		t.Fatalf("owner tags %q %q", tag, ownerTag(os.Getpid()))
	}
	stale := &Safety{t: t, name: safetyPrefix + tag + "-0sweep0"}
	if err := stale.create(8); err != nil {
		stale.remove()
		t.Skipf("no safety cgroups here: %v", err)
	}
	live := &Safety{t: t, name: safetyName()}
	if err := live.create(8); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.cleanup)
	t.Cleanup(stale.cleanup) // only if the sweep failed
	cmd := exec.Command("sleep", "60")
	if err := stale.Start(cmd); err != nil {
		t.Fatal(err)
	}
	unix.Kill(cmd.Process.Pid, unix.SIGSTOP)
	staleOnce = sync.Once{}
	sweepStale(t)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("the stopped process in the stale cgroup: %v, want killed", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the stopped process in the stale cgroup still lives after the sweep")
		cmd.Process.Kill()
	}
	for _, root := range stale.roots() {
		if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s: %v, want it removed", root, err)
		}
	}
	for _, root := range live.roots() {
		if _, err := os.Stat(root); err != nil {
			t.Errorf("live %s: %v, want it kept", root, err)
		}
	}
}
