// Command contained is the floor row "floor-contained" of BenchmarkRunTrue:
// the kernel's part of what `corral run -- true` promises, done by the
// smallest Go program that does it, so that the benchmark can show how far
// above it corral sits. It starts a watchdog (this binary re-executed, in
// its own session, blocked reading its stdin, killed at the end: corral's
// watchdog is corral re-executed the same way), makes a cgroup where the
// containment corral chooses here would go (a cgroup v2 directory the
// command is cloned into; and, where the pids controller is bound to a
// cgroup v1 hierarchy instead, a v1 directory the forking thread joins),
// sets its pids.max, runs bash -c true in it, waits, removes the
// directories, and kills and reaps the watchdog. No capture, no tier cache,
// no stale sweep, no limits envelope, no output; with -no-watchdog, no
// watchdog either. It needs root or a delegated cgroup: it exits 3 when it
// cannot make the directories (the benchmark then skips its row), 1 on any
// other failure.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "watchdog" {
		var b [1]byte
		_, _ = os.Stdin.Read(b[:]) // EOF: the parent is gone (here it is killed first)
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "contained:", err)
		var nc noCgroup
		if errors.As(err, &nc) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}

// noCgroup is the failure to make the containment's directories here.
type noCgroup struct{ error }

func run() error {
	v2, v1pids := cgroupMounts()
	if v2 == "" {
		return noCgroup{errors.New("no cgroup2 mount")}
	}
	// The pids controller: on v2 when its root enables it for children,
	// else on a v1 hierarchy (a hybrid host), as corral's tier picks.
	ctrl, _ := os.ReadFile(filepath.Join(v2, "cgroup.subtree_control"))
	pidsOnV2 := slices.Contains(strings.Fields(string(ctrl)), "pids")
	if !pidsOnV2 && v1pids == "" {
		return noCgroup{errors.New("no pids controller")}
	}

	if !slices.Contains(os.Args[1:], "-no-watchdog") {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		wd := exec.Command("/proc/self/exe", "watchdog")
		wd.Stdin, wd.Env = r, []string{"GOMAXPROCS=1"}
		wd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := wd.Start(); err != nil {
			return err
		}
		r.Close()
		defer func() {
			_ = wd.Process.Kill()
			_ = wd.Wait()
			w.Close()
		}()
	}

	name := fmt.Sprintf("corral-floor-%d", os.Getpid())
	leaf := filepath.Join(v2, name)
	if err := os.Mkdir(leaf, 0o755); err != nil {
		return noCgroup{err}
	}
	defer os.Remove(leaf)
	var v1leaf string
	if pidsOnV2 {
		if err := os.WriteFile(filepath.Join(leaf, "pids.max"), []byte("4096"), 0); err != nil {
			return err
		}
	} else {
		v1leaf = filepath.Join(v1pids, name)
		if err := os.Mkdir(v1leaf, 0o755); err != nil {
			return noCgroup{err}
		}
		defer os.Remove(v1leaf)
		if err := os.WriteFile(filepath.Join(v1leaf, "pids.max"), []byte("4096"), 0); err != nil {
			return err
		}
	}
	fd, err := syscall.Open(leaf, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)

	cmd := exec.Command("bash", "-c", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Setpgid: true}
	runtime.LockOSThread()
	if v1leaf != "" {
		// A v1 cgroup has no CLONE_INTO_CGROUP: the forking thread joins
		// it, and leaves it again once the child is born.
		if err := os.WriteFile(filepath.Join(v1leaf, "tasks"), []byte("0"), 0); err != nil {
			return err
		}
	}
	err = cmd.Start()
	if v1leaf != "" {
		if err := os.WriteFile(filepath.Join(v1pids, "tasks"), []byte("0"), 0); err != nil {
			return err
		}
	}
	runtime.UnlockOSThread()
	if err != nil {
		return err
	}
	return cmd.Wait()
}

// cgroupMounts returns the cgroup2 mount point and the mount point of the
// cgroup v1 hierarchy that carries the pids controller ("" for none).
// killtree/internal/procfs.CgroupMounts reads the same lines, but a floor
// imports none of corral's code (nor could it: that package is killtree's).
func cgroupMounts() (v2, v1pids string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch {
		case tail[0] == "cgroup2" && v2 == "":
			v2 = fields[4]
		case tail[0] == "cgroup" && slices.Contains(strings.Split(tail[2], ","), "pids"):
			v1pids = fields[4]
		}
	}
	return v2, v1pids
}
