package procfs

import (
	"os"
	"strconv"
	"strings"
)

// ChildrenPath names the children list of pid's main thread,
// /proc/<pid>/task/<pid>/children (CONFIG_PROC_CHILDREN).
func ChildrenPath(pid int) string {
	p := strconv.Itoa(pid)
	return "/proc/" + p + "/task/" + p + "/children"
}

// Children lists the children of every thread of pid, read through buf;
// threads 1 reads only the main thread's list, without listing
// /proc/<pid>/task. The kernel calls these lists imprecise while the tree
// changes (Documentation/filesystems/proc.rst): a caller that must see
// every process stops them and reads again. A process that vanished reads
// as no children.
func Children(pid, threads int, buf []byte) []int {
	base := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids := []string{strconv.Itoa(pid)}
	if threads != 1 {
		d, err := os.Open(base)
		if err != nil {
			return nil
		}
		tids, _ = d.Readdirnames(-1)
		d.Close()
	}
	var out []int
	for _, tid := range tids {
		b, err := ReadFile(base+tid+"/children", buf)
		if err == nil {
			out = append(out, ParsePids(b)...)
		}
	}
	return out
}

// Holders scans /proc/*/fd and returns the PIDs, except skip, that hold a
// descriptor whose link target (readlink /proc/<pid>/fd/N: "pipe:[INODE]",
// "/dev/pts/N", ...) is in targets. A process it may not read, or that
// vanished meanwhile, is skipped.
func Holders(targets map[string]bool, skip int) ([]int, error) {
	pids, err := Pids()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range pids {
		if pid == skip {
			continue
		}
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
		d, err := os.Open(dir)
		if err != nil {
			continue
		}
		fds, _ := d.Readdirnames(-1)
		d.Close()
		for _, x := range fds {
			if l, err := os.Readlink(dir + x); err == nil && targets[l] {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// Comm returns pid's command name (/proc/<pid>/comm without its newline),
// or "?" when it cannot be read.
func Comm(pid int) string {
	b, err := ReadFile("/proc/"+strconv.Itoa(pid)+"/comm", nil)
	if err != nil {
		return "?"
	}
	return strings.TrimSuffix(string(b), "\n")
}

// Cgroups returns the text of /proc/<pid>/cgroup ("ID:CONTROLLERS:PATH"
// lines; a zombie keeps its cgroups until it is reaped).
func Cgroups(pid int) (string, error) {
	b, err := ReadFile("/proc/"+strconv.Itoa(pid)+"/cgroup", nil)
	return string(b), err
}

// CgroupMounts picks the cgroup hierarchies out of mountinfo text
// (proc(5): "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] -
// FSTYPE SOURCE SUPEROPTIONS"), counting only mounts of a hierarchy's root:
// v2 is the first cgroup2 mount point ("" if none), v1 maps each v1
// controller (and named hierarchy option) to its first mount point.
func CgroupMounts(mountinfo string) (v2 string, v1 map[string]string) {
	v1 = map[string]string{}
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || f[3] != "/" {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if v2 == "" {
				v2 = f[4]
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if _, dup := v1[o]; !dup && o != "rw" && o != "ro" {
					v1[o] = f[4]
				}
			}
		}
	}
	return v2, v1
}
