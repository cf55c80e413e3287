package confine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Root is an open root directory. It is safe for concurrent use.
type Root struct {
	*os.Root
	dir       string // the root's path as opened
	escapeErr error  // os.Root's error for a path out of the root
	uid, gid  int    // the owner of what Root makes; -1: this process's user
}

// Open opens dir as a Root. owner, when not "", is the user (a login name
// or a numeric ID) that files and directories made through the Root are
// given to. Close releases it.
func Open(dir, owner string) (*Root, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	root := &Root{Root: r, dir: r.Name(), uid: -1, gid: -1}
	if owner != "" {
		if root.uid, root.gid, err = ids(owner); err != nil {
			r.Close()
			return nil, err
		}
	}
	// os.Root does not export the error of an escape; learn it from one.
	_, err = r.Lstat("..")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		root.escapeErr = pe.Err
	}
	return root, nil
}

// ids looks up the numeric user and group IDs of name.
func ids(name string) (int, int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return 0, 0, fmt.Errorf("confine: owner: %w", err)
		}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("confine: user %s has no numeric IDs (%s:%s)", name, u.Uid, u.Gid)
	}
	return uid, gid, nil
}

// Dir is the root's path.
func (r *Root) Dir() string { return r.dir }

// Local turns a path a client gave into one relative to the root: the
// root's own absolute path, or a leading "/", is dropped (so "/a" and
// "<root>/a" are both "a"), and "" or "/" is "." (the root itself). ok is
// false for a path that climbs out ("..") or holds a NUL.
func (r *Root) Local(p string) (string, bool) {
	p = filepath.ToSlash(p)
	if strings.ContainsRune(p, 0) {
		return "", false
	}
	rootSlash := filepath.ToSlash(r.dir)
	if p == rootSlash {
		p = ""
	} else if rest, ok := strings.CutPrefix(p, strings.TrimSuffix(rootSlash, "/")+"/"); ok {
		p = rest
	}
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return ".", true
	}
	if !filepath.IsLocal(filepath.FromSlash(p)) {
		return "", false
	}
	return filepath.Clean(filepath.FromSlash(p)), true
}

// Escapes reports whether err is the Root's refusal of a path or a symlink
// that leads out of it.
func (r *Root) Escapes(err error) bool {
	return r.escapeErr != nil && errors.Is(err, r.escapeErr)
}

// WriteAtomic writes src to rel atomically: a temporary file beside it,
// synced, then renamed over it, so a reader sees the old file or the new
// one whole. Missing parents are made (0755); mode is set exactly,
// whatever the umask. It returns the bytes written.
func (r *Root) WriteAtomic(rel string, src io.Reader, mode fs.FileMode) (n int64, retErr error) {
	dir := filepath.Dir(rel)
	if err := r.MakeDirs(dir); err != nil {
		return 0, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails (Go 1.24)
	tmp := filepath.Join(dir, ".corral-tmp-"+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	defer func() {
		if retErr != nil {
			f.Close()
			r.Remove(tmp)
		}
	}()
	if n, err = io.Copy(f, src); err != nil {
		return n, fmt.Errorf("writing the file: %w", err)
	}
	if r.uid >= 0 {
		if err := f.Chown(r.uid, r.gid); err != nil {
			return n, err
		}
	}
	if err := f.Chmod(mode); err != nil {
		return n, err
	}
	if err := f.Sync(); err != nil {
		return n, err
	}
	if err := f.Close(); err != nil {
		return n, err
	}
	return n, r.Rename(tmp, rel)
}

// MakeDirs makes dir and its missing parents beneath the root (0755), each
// given to the owner.
func (r *Root) MakeDirs(dir string) error {
	if dir == "." {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(filepath.ToSlash(dir), "/") {
		cur = path.Join(cur, part)
		err := r.Mkdir(filepath.FromSlash(cur), 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue // a directory, or a link to one inside the root; else the next step says so
		}
		if err != nil {
			return err
		}
		if r.uid >= 0 {
			if err := r.Lchown(filepath.FromSlash(cur), r.uid, r.gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// Clear removes what the root holds, keeping the root itself (a volume's
// mount point).
func (r *Root) Clear() error {
	d, err := r.Open(".")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := r.RemoveAll(n); err != nil {
			return err
		}
	}
	return nil
}
