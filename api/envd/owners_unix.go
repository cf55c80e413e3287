//go:build unix

package envd

import (
	"io/fs"
	"os/user"
	"strconv"
	"syscall"
)

// owners names fi's owner and group, as envd does: the names, else the
// numeric IDs.
func owners(fi fs.FileInfo) (owner, group string) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", ""
	}
	owner, group = strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return owner, group
}
