package proctest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// staleOnce makes one sweep per test process.
var staleOnce sync.Once

// sweepStale kills and removes the safety cgroups a test process that is
// gone left behind: a test binary killed by go test's -timeout or by a
// signal runs no cleanup, and what it started (a stopped fork bomb cannot
// reach its self-expiry) would hold its cgroup's tasks, and the machine's,
// until someone looked. A safety cgroup of a live test process, or one whose
// name carries no owner, is left alone.
func sweepStale(t testing.TB) {
	staleOnce.Do(func() {
		mounts, err := readMounts()
		if err != nil {
			return
		}
		stale := map[string]*Safety{}
		add := func(root, controller string, v2 bool) {
			entries, _ := os.ReadDir(root)
			for _, e := range entries {
				name := e.Name()
				owner, _, ok := strings.Cut(strings.TrimPrefix(name, safetyPrefix), "-")
				if !e.IsDir() || !strings.HasPrefix(name, safetyPrefix) || !ok || !strings.HasPrefix(owner, "p") {
					continue
				}
				pid, _, _ := strings.Cut(owner[1:], "s")
				if n, err := strconv.Atoi(pid); err != nil || ownerTag(n) == owner {
					continue // malformed, or its owner lives
				}
				s := stale[name]
				if s == nil {
					s = &Safety{t: t, name: name}
					stale[name] = s
				}
				dir := filepath.Join(root, name)
				if v2 {
					s.v2 = dir
					continue
				}
				s.v1 = append(s.v1, v1Cgroup{controller: controller, mount: root, dir: dir})
				if controller == "freezer" {
					s.freezer = dir
				}
			}
		}
		seen := map[string]bool{}
		for c, mnt := range mounts.v1 {
			if !seen[mnt] {
				seen[mnt] = true
				add(mnt, c, false)
			}
		}
		if mounts.v2 != "" {
			add(mounts.v2, "", true)
		}
		for name, s := range stale {
			n := s.sweep()
			t.Logf("proctest: swept the safety cgroup %s of a test process that is gone (%d processes were left in it)", name, n)
		}
	})
}

// sweep kills what is left in a stale safety cgroup, removes it, and
// returns how many processes it found; it gives up after cleanupLimit.
func (s *Safety) sweep() int {
	found := len(s.members())
	for deadline := time.Now().Add(cleanupLimit); len(s.members()) > 0 && time.Now().Before(deadline); {
		s.killRound()
		time.Sleep(10 * time.Millisecond)
	}
	_ = s.remove() // Best effort: a busy one is retried by the next test process.
	return found
}
