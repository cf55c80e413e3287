//go:build unix

package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
)

// apply makes cmd run as the user: its IDs and supplementary groups are set
// in the child after fork and before exec (SysProcAttr.Credential; the
// chdir to cmd.Dir comes after, so it is checked as the user). killtree
// keeps the field when it adds its own.
func (r *runAs) apply(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: r.uid, Gid: r.gid, Groups: r.groups}
}

// canEnter reports whether the user may search every directory on the way
// to dir (symlinks resolved) and dir itself, by the permission bits: owner,
// then group, then others, as the kernel checks them. ACLs are not read; a
// directory an ACL opens or closes is decided by the chdir at start, which
// then fails with a clear error.
func (r *runAs) canEnter(dir string) bool {
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	if p, err = filepath.Abs(p); err != nil {
		return false
	}
	for {
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() || !r.mayExec(fi) {
			return false
		}
		parent := filepath.Dir(p)
		if parent == p {
			return true
		}
		p = parent
	}
}

// mayExec is the permission-bit check of search (execute) access.
func (r *runAs) mayExec(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := fi.Mode().Perm()
	switch {
	case st.Uid == r.uid:
		return mode&0o100 != 0
	case st.Gid == r.gid || slices.Contains(r.groups, st.Gid):
		return mode&0o010 != 0
	}
	return mode&0o001 != 0
}

// mayRunAs refuses a supervisor that is not root: only root can change a
// child's user and groups.
func mayRunAs() error {
	if euid := os.Geteuid(); euid != 0 {
		return fmt.Errorf("only root can run commands as another user, and this process runs as uid %d", euid)
	}
	return nil
}
