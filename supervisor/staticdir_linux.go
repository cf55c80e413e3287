package supervisor

import (
	"os"
	"strconv"
	"strings"
)

// openStartDir holds a static command's start directory open, so that its
// end can follow a rename the command made (followDir). nil when it cannot
// be opened: the directory as given is then saved.
func openStartDir(dir string) *os.File {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	return f
}

// followDir returns where the directory f holds is now, when dir no longer
// names it (the command renamed it, or a parent of it): what `pwd -P` in the
// shell would have reported. ok is false when dir still names it, or the
// directory was removed.
func followDir(f *os.File, dir string) (string, bool) {
	held, err := f.Stat()
	if err != nil {
		return "", false
	}
	if now, err := os.Stat(dir); err == nil && os.SameFile(held, now) {
		return "", false
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	return p, true
}
