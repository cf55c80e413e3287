package killtree

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestZZPieces2(t *testing.T) {
	mnt := findMounts()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home := threadCgroups()["pids"]
	res := map[string][]time.Duration{}
	modes := []string{"plain", "v2", "v2-stat", "v2-read", "v2-sleep", "v2-existing"}
	exist, _ := mkLeaf(mnt.v2, "zzp/exist")
	efd, _ := unix.Open(exist, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for i := 0; i < 300; i++ {
		for _, m := range modes {
			rel := filepath.Join("zzp", strconv.Itoa(i)+m)
			d2, _ := mkLeaf(mnt.v2, rel)
			d1, _ := mkLeaf(mnt.v1["pids"], rel)
			fd, _ := unix.Open(d2, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			cmd := exec.Command("/usr/bin/bash", "-c", "true")
			attr := &syscall.SysProcAttr{Setsid: true}
			if m == "v2" || m == "both" || m == "v2-stat" || m == "v2-read" || m == "v2-sleep" { attr.UseCgroupFD = true; attr.CgroupFD = fd }
			if m == "v2-stat" { var st unix.Stat_t; unix.Stat(filepath.Join(d2, "cgroup.procs"), &st) }
			if m == "v2-read" { readFileOr(filepath.Join(d2, "cgroup.procs")) }
			if m == "v2-sleep" { time.Sleep(3 * time.Millisecond) }
			if m == "v2-existing" { attr.UseCgroupFD = true; attr.CgroupFD = efd }
			cmd.SysProcAttr = attr
			t0 := time.Now()
			if m == "v1" || m == "both" { writeFile(filepath.Join(d1, "tasks"), "0") }
			cmd.Start()
			if m == "v1" || m == "both" { writeFile(filepath.Join(mnt.v1["pids"], home, "tasks"), "0") }
			t1 := time.Now()
			cmd.Wait()
			t2 := time.Now()
			res[m+" start"] = append(res[m+" start"], t1.Sub(t0))
			res[m+" wait"] = append(res[m+" wait"], t2.Sub(t1))
			unix.Close(fd)
			rmLeaf(d2); rmLeaf(d1)
		}
	}
	unix.Close(efd)
	rmLeaf(exist)
	unix.Rmdir(filepath.Join(mnt.v2, "zzp")); unix.Rmdir(filepath.Join(mnt.v1["pids"], "zzp"))
	for _, m := range modes {
		for _, k := range []string{" start", " wait"} {
			x := res[m+k]; sort.Slice(x, func(a, b int) bool { return x[a] < x[b] })
			var s time.Duration; for _, v := range x { s += v }
			fmt.Printf("%-18s median %v mean %v\n", m+k, x[len(x)/2], s/time.Duration(len(x)))
		}
	}
}
