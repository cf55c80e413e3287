package supervisor

import (
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/spill"
)

// Bounds are the limits a Supervisor applies, its Config's with every
// default filled in: what a front end states to its users (the MCP tool
// descriptions do), so that the text cannot drift from the configuration.
type Bounds struct {
	MaxTimeout       time.Duration // a request's timeout lies in [MinTimeout, MaxTimeout]
	Budget           budget.Limits // the model view of each stream
	Capture          CaptureLimits // what is kept in memory of each stream
	SpillMaxBytes    int64         // the most one spill file holds
	MaxJobs          int           // background jobs running at once
	MaxJobLifetime   time.Duration // a job's lifetime lies in [MinTimeout, MaxJobLifetime]
	JobRetention     time.Duration // how long an exited job stays readable
	MaxRetainedJobs  int           // exited jobs kept readable at most
	MaxRetainedBytes int64         // the output they may keep, all together
	Limits           Limits        // each command's default and largest resource limits (0: none)
	Tier             killtree.Tier // the containment tier commands run in
	User, UserDir    string        // the user commands run as and the directory of a request without Dir; "" when they run as this process's user
	Shell            string        // the shell a Command runs with (Config.Shell, or the one New found)
}

// Bounds returns the limits s applies. It is safe for concurrent use.
func (s *Supervisor) Bounds() Bounds {
	b := Bounds{
		MaxTimeout:       s.maxTimeout,
		Budget:           s.cfg.Budget,
		Capture:          s.cfg.Capture.norm(),
		SpillMaxBytes:    s.cfg.SpillMaxBytes,
		MaxJobs:          s.jobs.max,
		MaxJobLifetime:   s.jobs.maxLifetime,
		JobRetention:     s.jobs.retention,
		MaxRetainedJobs:  s.jobs.maxRetained,
		MaxRetainedBytes: s.jobs.maxBytes,
		Limits:           s.ceilings(),
		Tier:             s.trees.Tier(),
		Shell:            s.shell,
	}
	if s.user != nil {
		b.User, b.UserDir = s.user.name, s.user.dir
	}
	if b.Budget.MaxBytes <= 0 {
		b.Budget.MaxBytes = budget.DefaultMaxBytes
	}
	if b.Budget.MaxLines <= 0 {
		b.Budget.MaxLines = budget.DefaultMaxLines
	}
	if b.SpillMaxBytes <= 0 {
		b.SpillMaxBytes = spill.DefaultMaxBytes
	}
	return b
}
