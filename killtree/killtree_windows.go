package killtree

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// On Windows the only tier is the job object (docs/killtree.md §4, §8.3 W2;
// CreateProcess with CREATE_SUSPENDED, then AssignProcessToJobObject): the
// command is created suspended, assigned to a fresh job, then resumed, so no
// instruction of it runs outside the job. Kill-on-close makes a crashed
// supervisor's jobs die with its handles.

func detect(cfg Config) []TierStatus {
	st := TierStatus{Tier: TierJob, Works: true, Reason: "job object: kill-on-close, active-process limit, no breakaway"}
	if j, err := newWinJob(cfg); err != nil {
		st.Works, st.Reason = false, err.Error()
	} else {
		j.close()
	}
	return []TierStatus{
		{Tier: TierCgroup2, Reason: "Linux only"},
		{Tier: TierCgroup1, Reason: "Linux only"},
		{Tier: TierPgroup, Reason: "Unix only"},
		st,
	}
}

type platform struct {
	cfg      Config
	instance string
}

func newPlatform(cfg Config, tier Tier) (*platform, error) {
	if cfg.Reaper {
		return nil, fmt.Errorf("killtree: a per-command reaper needs Linux (PR_SET_CHILD_SUBREAPER): %w", ErrUnavailable)
	}
	return &platform{cfg: cfg, instance: strconv.Itoa(os.Getpid())}, nil
}

// capInstance does nothing here: the job tier has no shared parent.
func (p *platform) capInstance(n int) {}

func (p *platform) newContainment(id string) (containment, error) {
	j, err := newWinJob(p.cfg)
	if err != nil {
		return nil, err
	}
	return &jobC{j: j}, nil
}

// start starts cmd in a fresh job with the limits lim (resolved; see
// startFresh).
func (p *platform) start(cmd *exec.Cmd, lim Limits, name func(id string)) (containment, error) {
	cfg := lim.config(p.cfg)
	return startFresh(func(string) (containment, error) {
		j, err := newWinJob(cfg)
		if err != nil {
			return nil, err
		}
		return &jobC{j: j}, nil
	}, cmd, name)
}

// enforces reports which limits the job tier enforces: memory (the job's
// memory limit) and pids (its active-process limit); no CPU quota.
func (p *platform) enforces() (memory, cpus, pids bool) { return true, false, true }

// tierLimits says how tier enforces each limit here (Doctor).
func tierLimits(tier Tier) []LimitStatus {
	if tier != TierJob {
		why := "Linux only"
		if tier == TierPgroup {
			why = "Unix only"
		}
		return []LimitStatus{{Limit: LimitMemory, How: why}, {Limit: LimitCPUs, How: why}, {Limit: LimitPids, How: why}}
	}
	return []LimitStatus{
		{Limit: LimitMemory, Enforced: true, How: "job memory limit"},
		{Limit: LimitCPUs, How: "no CPU rate control set"},
		{Limit: LimitPids, Enforced: true, How: "job active-process limit"},
	}
}

// destroy removes a closed tree's containment.
func (p *platform) destroy(c containment, empty bool) error { return c.destroy() }

func (p *platform) close() error { return nil }

// opened and ended are Config.OwnProcess's bookkeeping, which needs a
// subreaper (Linux).
func (p *platform) opened(*Tree) {}
func (p *platform) ended(*Tree)  {}
