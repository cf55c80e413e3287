//go:build unix && !linux

package killtree

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"golang.org/x/sys/unix"
)

// On macOS and the BSDs only the pgroup tier exists, without a subreaper:
// orphans reparent to init, so the sweep follows the leader's session and
// group, the descendants of every process it saw, and processes seen before
// (PID and creation time). A process that leaves the session and whose
// parent exits before a sweep sees it is out of reach (docs/killtree.md §5).

type platform struct {
	cfg      Config
	instance string
}

func detect(cfg Config) []TierStatus {
	return []TierStatus{
		{Tier: TierCgroup2, Reason: "Linux only"},
		{Tier: TierCgroup1, Reason: "Linux only"},
		{Tier: TierPgroup, Works: true, Reason: "own session, kill(-pgid) while the leader is unreaped, descendant walk; no subreaper, no fork limit"},
		{Tier: TierJob, Reason: "Windows only"},
	}
}

// uproc is one process of a listing.
type uproc struct {
	pid, ppid, pgid int
	zombie          bool
	start           int64
}

// leaderGone reports whether pid is a zombie or no longer exists.
func leaderGone(pid int) bool {
	ps, err := listProcs()
	if err != nil {
		return unix.Kill(pid, 0) != nil
	}
	for _, p := range ps {
		if p.pid == pid {
			return p.zombie
		}
	}
	return true
}

func newPlatform(cfg Config, tier Tier) (*platform, error) {
	if cfg.Reaper {
		return nil, fmt.Errorf("killtree: a per-command reaper needs Linux (PR_SET_CHILD_SUBREAPER): %w", ErrUnavailable)
	}
	return &platform{cfg: cfg, instance: strconv.Itoa(os.Getpid())}, nil
}

func (p *platform) newContainment(id string) (containment, error) { return pgroupC{}, nil }

// capInstance does nothing here: no cgroups.
func (p *platform) capInstance(n int) {}

// start starts cmd in a fresh containment (see startFresh). No limit is
// enforced here (see enforces).
func (p *platform) start(cmd *exec.Cmd, lim Limits, name func(id string)) (containment, error) {
	return startFresh(p.newContainment, cmd, name)
}

// enforces reports which limits are enforced here: none. RLIMIT_AS can
// only be set by the process itself on macOS and the BSDs (no prlimit).
func (p *platform) enforces() (memory, cpus, pids bool) { return false, false, false }

// rlimitCmd is not available here (see enforces).
func rlimitCmd(cmd *exec.Cmd, bytes int64) error { return nil }

// tierLimits says how tier enforces each limit here (Doctor).
func tierLimits(tier Tier) []LimitStatus {
	why := "Linux only"
	if tier == TierPgroup {
		why = "not enforced on this OS"
	}
	return []LimitStatus{{Limit: LimitMemory, How: why}, {Limit: LimitCPUs, How: why}, {Limit: LimitPids, How: why}}
}

// destroy removes a closed tree's containment.
func (p *platform) destroy(c containment, empty bool) error { return c.destroy() }

func (p *platform) close() error { return nil }

// opened and ended are Config.OwnProcess's bookkeeping, which needs a
// subreaper (Linux).
func (p *platform) opened(*Tree) {}
func (p *platform) ended(*Tree)  {}
