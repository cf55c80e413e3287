package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// runAs is the unprivileged user commands run as (Config.User), resolved
// once by New.
type runAs struct {
	name     string   // the login name
	uid, gid uint32   // the user's ID and primary group
	groups   []uint32 // its supplementary groups, the primary one included
	home     string   // its home directory in the user database, "/" when it has none
	// dir is the working directory of a request that names none: the
	// supervisor's own when the user can enter it, else the user's home when
	// it can enter that, else "/".
	dir string
}

// lookupRunAs resolves name (a login name or a numeric user ID) in the user
// database. It refuses root as the target, and a supervisor that cannot
// change a child's user (mayRunAs).
func lookupRunAs(name string) (*runAs, error) {
	if err := mayRunAs(); err != nil {
		return nil, fmt.Errorf("supervisor: run as %q: %w", name, err)
	}
	u, err := user.Lookup(name)
	if _, unknown := err.(user.UnknownUserError); unknown {
		if _, nerr := strconv.ParseUint(name, 10, 32); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("supervisor: run as %q: %w", name, err)
	}
	r := &runAs{name: u.Username, home: u.HomeDir}
	if r.home == "" {
		r.home = "/"
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("supervisor: run as %q: user ID %q: %w", name, u.Uid, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("supervisor: run as %q: that is root; run as an unprivileged user, or not at all", name)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("supervisor: run as %q: group ID %q: %w", name, u.Gid, err)
	}
	r.uid, r.gid = uint32(uid), uint32(gid)
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("supervisor: run as %q: supplementary groups: %w", name, err)
	}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("supervisor: run as %q: group ID %q: %w", name, id, err)
		}
		r.groups = append(r.groups, uint32(g))
	}
	r.dir = "/"
	if wd, err := os.Getwd(); err == nil && r.canEnter(wd) {
		r.dir = wd
	} else if r.canEnter(r.home) {
		r.dir = r.home
	}
	return r, nil
}

// requestUser resolves Request.User: the configured user (or this
// process's, when none is configured) when it names that user, else
// another user, which lookupRunAs checks (root only; never root). A user
// of the request starts a request without Dir in its home (when it can
// enter it, else "/"), not in the supervisor's directory.
func (s *Supervisor) requestUser(name string) (*runAs, error) {
	if s.user != nil && (name == s.user.name || name == strconv.FormatUint(uint64(s.user.uid), 10)) {
		return s.user, nil
	}
	if s.user == nil {
		if me, err := user.Current(); err == nil && (name == me.Username || name == me.Uid) {
			return nil, nil
		}
	}
	r, err := lookupRunAs(name)
	var unknown user.UnknownUserError
	switch {
	case errors.As(err, &unknown):
		return nil, fmt.Errorf("user %q does not exist", name)
	case err != nil:
		prefix := fmt.Sprintf("supervisor: run as %q: ", name)
		return nil, fmt.Errorf("user %q: %s", name, strings.TrimPrefix(err.Error(), prefix))
	case s.user != nil && !slices.Contains(s.allowed, r.name):
		// A supervisor told to run commands as one user runs them as no
		// other unless its operator listed it.
		return nil, fmt.Errorf("user %q is not allowed: commands run as %s (the operator allows others with --allow-user)", name, s.user.name)
	}
	r.dir = "/"
	if r.canEnter(r.home) {
		r.dir = r.home
	}
	return r, nil
}

// env is what the user's login sets and a command sees in place of the
// supervisor's own values: HOME, USER and LOGNAME.
func (r *runAs) env() []string {
	return []string{"HOME=" + r.home, "USER=" + r.name, "LOGNAME=" + r.name}
}

// userKeys are the names runAs.env sets.
var userKeys = map[string]bool{"HOME": true, "USER": true, "LOGNAME": true}
