package killtree

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

type detectEntry struct {
	once sync.Once
	st   []TierStatus
}

var detectCache sync.Map // CgroupParent -> *detectEntry

// detect returns every tier's status, computed once per CgroupParent per
// process (the self-tests spawn processes; their answer does not change).
func detect(cfg Config) []TierStatus {
	v, _ := detectCache.LoadOrStore(cfg.CgroupParent, &detectEntry{})
	e := v.(*detectEntry)
	e.once.Do(func() {
		e.st = []TierStatus{probeCgroup2(cfg), probeCgroup1(cfg), probePgroup(), {Tier: TierJob, Reason: "Windows only"}}
		for _, d := range findMounts().instanceDirs(cfg.CgroupParent, instance()) {
			_ = unix.Rmdir(d) // EBUSY/ENOTEMPTY: a Manager uses it; mkLeaf recreates it when missing
		}
	})
	return append([]TierStatus(nil), e.st...)
}

func trueBinary() string {
	if p, err := exec.LookPath("true"); err == nil {
		return p
	}
	return "/bin/true"
}

// selfTest starts `true` in c and requires exit status 0.
func selfTest(c containment) error {
	cmd := exec.Command(trueBinary())
	if err := c.start(cmd); err != nil {
		return fmt.Errorf("start true: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("true in a fresh leaf: %w", err)
	}
	return nil
}

func probeCgroup2(cfg Config) TierStatus {
	st := TierStatus{Tier: TierCgroup2}
	mnt := findMounts()
	if mnt.v2 == "" {
		st.Reason = "no cgroup2 mount"
		return st
	}
	c, err := newCgroup2(mnt, cfg, instance(), "selftest-"+strconv.FormatUint(treeSeq.Add(1), 10), nil)
	if err != nil {
		st.Reason = fmt.Sprintf("cannot create a leaf under %s: %v", mnt.place(mnt.v2, cfg.CgroupParent), err)
		return st
	}
	defer c.destroy()
	if _, err := os.Stat(filepath.Join(c.dir, "cgroup.kill")); err != nil {
		st.Reason = "no cgroup.kill (kernel older than 5.14)"
		return st
	}
	if err := selfTest(c); err != nil {
		st.Reason = "self-test failed: " + err.Error()
		return st
	}
	var details []string
	details = append(details, "cgroup2 at "+mnt.v2, mnt.placeNote(mnt.v2, cfg.CgroupParent))
	if mnt.v2busy != "" {
		details = append(details, "no v2 controller for the leaves: "+mnt.v2busy)
	}
	switch {
	case cfg.PidsMax < 0:
		details = append(details, "no fork limit (PidsMax < 0)")
	case mnt.v2ctrl["pids"]:
		details = append(details, "pids.max through the v2 pids controller")
	case mnt.v1["pids"] != "":
		details = append(details, "pids.max through the v1 pids hierarchy (hybrid)")
	default:
		details = append(details, "no pids controller: no fork limit")
	}
	if killSeqBug(c) {
		details = append(details, "kernel kills a child cloned into a once-killed cgroup (kill_seq); leaves are single-use")
	}
	st.Works = true
	st.Reason = strings.Join(details, "; ")
	return st
}

// killSeqBug kills the (now empty) leaf and clones `true` into it again; it
// reports whether the child was killed at birth (docs/killtree.md E6b; the
// kill at birth is kernel/cgroup/cgroup.c cgroup_post_fork).
func killSeqBug(c *cgroup2) bool {
	if writeFile(filepath.Join(c.dir, "cgroup.kill"), "1") != nil {
		return false
	}
	fd, err := unix.Open(c.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	cmd := exec.Command(trueBinary())
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}

func probeCgroup1(cfg Config) TierStatus {
	st := TierStatus{Tier: TierCgroup1}
	mnt := findMounts()
	if mnt.v1["freezer"] == "" {
		st.Reason = "no cgroup v1 freezer hierarchy"
		return st
	}
	c, err := newCgroup1(mnt, cfg, instance(), "selftest-"+strconv.FormatUint(treeSeq.Add(1), 10), nil)
	if err != nil {
		st.Reason = fmt.Sprintf("cannot create a freezer leaf: %v", err)
		return st
	}
	defer c.destroy()
	if err := selfTest(c); err != nil {
		st.Reason = "self-test failed: " + err.Error()
		return st
	}
	st.Works = true
	st.Reason = "freezer at " + mnt.v1["freezer"] + "; " + mnt.placeNote(mnt.v1["freezer"], cfg.CgroupParent)
	if cfg.PidsMax > 0 && mnt.v1["pids"] != "" {
		st.Reason += "; pids.max through the v1 pids hierarchy"
	} else {
		st.Reason += "; no fork limit"
	}
	return st
}

func probePgroup() TierStatus {
	st := TierStatus{Tier: TierPgroup, Works: true}
	if err := becomeSubreaper(); err != nil {
		st.Works = false
		st.Reason = err.Error()
		return st
	}
	st.Reason = "own session, child subreaper sweeps; no fork limit; "
	if pidfdGroupSignal() {
		st.Reason += "group kill through pidfd (PIDFD_SIGNAL_PROCESS_GROUP)"
	} else {
		st.Reason += "group kill with kill(-pgid) while the leader is unreaped"
	}
	return st
}
