package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/shellstate"
)

// TestNoDescriptorLeaksIntoStaticShells runs 50 commands at once, static
// ones (no descriptor of corral's) and tracked ones (the state memfd on 3
// and 9, the script on 4, and with a journal the start gate on 5) mixed,
// with and without a journal, and requires every static shell to hold only
// 0–2 and what this process itself holds without close-on-exec (inherited
// from whatever ran the test, and handed to every child of every program:
// not corral's). Every descriptor corral makes is close-on-exec from its
// creation (pipe2, memfd_create, eventfd, open, inotify_init1 and pidfd_open
// with their CLOEXEC flags), and os/exec moves ExtraFiles onto 3… in the
// child only (syscall.forkAndExecInChild1 dup3s after the fork), so a
// concurrent fork cannot catch one.
func TestNoDescriptorLeaksIntoStaticShells(t *testing.T) {
	t.Parallel()
	inherited := inheritedFDs(t)
	sups := []*Supervisor{newSup(t, Config{}), newSup(t, Config{Journal: openJournal(t, t.TempDir())})}
	const static = "ls -l /proc/self/fd"
	if !shellstate.LeavesAlone(static) {
		t.Fatal("the probe is not static")
	}
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan string, n) // one per static shell
	for i := range n {
		wg.Go(func() {
			s, sess := sups[i%2], fmt.Sprintf("s%d", i)
			if i%4 >= 2 {
				run(t, s, Request{Session: sess, Command: "cd . && ls -l /proc/self/fd >/dev/null"})
				return
			}
			res := run(t, s, Request{Session: sess, Command: static})
			var leaked []string
			for fd, target := range lsFDs(res.Stdout) {
				if fd > 2 && !inherited[fd] && !strings.HasSuffix(target, "/fd") { // ls's own listing
					leaked = append(leaked, fmt.Sprintf("%d -> %s", fd, target))
				}
			}
			if leaked != nil {
				slices.Sort(leaked)
				errs <- fmt.Sprintf("%s: a static shell holds %s", sess, strings.Join(leaked, ", "))
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// inheritedFDs lists this process's descriptors without close-on-exec.
func inheritedFDs(t *testing.T) map[int]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			out[fd] = true
		}
	}
	if keys := slicesOf(out); len(keys) > 3 {
		t.Logf("this process holds descriptors without close-on-exec: %v (every child inherits them)", keys)
	}
	return out
}

func slicesOf(m map[int]bool) []int {
	var keys []int
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// lsFDs parses `ls -l /proc/self/fd`: descriptor -> target.
func lsFDs(out string) map[int]string {
	fds := map[int]string{}
	for line := range strings.SplitSeq(out, "\n") {
		name, target, ok := strings.Cut(line, " -> ")
		if f := strings.Fields(name); ok && len(f) > 0 {
			if fd, err := strconv.Atoi(filepath.Base(f[len(f)-1])); err == nil {
				fds[fd] = target
			}
		}
	}
	return fds
}
