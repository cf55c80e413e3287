package procfs

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestCgroupMounts(t *testing.T) {
	t.Parallel()
	const text = "" +
		// a hybrid host: the v2 hierarchy beside v1 controllers, one co-mounted pair
		"30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n" +
		"31 25 0:27 / /sys/fs/cgroup/pids rw,nosuid shared:9 - cgroup cgroup rw,pids\n" +
		"32 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n" +
		// a bind mount of a sub-cgroup: not a hierarchy's root, ignored
		"40 25 0:27 /sub /mnt/pids rw - cgroup cgroup rw,pids\n" +
		// a second cgroup2 mount: the first one wins
		"41 25 0:26 / /other rw - cgroup2 cgroup2 rw\n" +
		// not a cgroup, and a line that does not parse
		"50 25 0:30 / /proc rw - proc proc rw\n" +
		"garbage\n"
	v2, v1 := CgroupMounts(text)
	if v2 != "/sys/fs/cgroup/unified" {
		t.Errorf("v2 = %q", v2)
	}
	want := map[string]string{"pids": "/sys/fs/cgroup/pids", "cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"}
	if d := cmp.Diff(want, v1); d != "" {
		t.Errorf("v1 (-want +got):\n%s", d)
	}
}

// TestHoldersAndChildren: a child holding our pipe is found by the pipe's
// link, this process is skipped, and the child is among this process's
// children; its comm reads back.
func TestHoldersAndChildren(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cmd := exec.Command("sleep", "30")
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var st unix.Stat_t
	if err := unix.Fstat(int(w.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	link := map[string]bool{"pipe:[" + strconv.FormatUint(st.Ino, 10) + "]": true}
	got, err := Holders(link, os.Getpid())
	if err != nil || !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("Holders = %v, %v; want [%d] (this process, which holds the write end, skipped)", got, err, cmd.Process.Pid)
	}
	if got, _ := Holders(link, 0); !slices.Contains(got, os.Getpid()) {
		t.Errorf("Holders without skip = %v, want this process among them", got)
	}
	if kids := Children(os.Getpid(), 0, nil); !slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("Children = %v, want %d among them", kids, cmd.Process.Pid)
	}
	if c := Comm(cmd.Process.Pid); c != "sleep" {
		t.Errorf("Comm = %q", c)
	}
	if c := Comm(-1); c != "?" {
		t.Errorf("Comm of no process = %q", c)
	}
	if text, err := Cgroups(os.Getpid()); err != nil || text == "" {
		t.Errorf("Cgroups = %q, %v", text, err)
	}
}
