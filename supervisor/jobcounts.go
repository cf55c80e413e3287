package supervisor

// JobCounts counts the listed background jobs by state (Jobs.Counts).
// Waiting is a part of Running: the running jobs blocked reading their
// input now.
type JobCounts struct {
	Running int // running, waiting or not
	Waiting int // running and waiting for input (docs/terminals.md)
	Exited  int // exited and still retained (readable)
}

// Counts counts the jobs Jobs.List would list, without describing them (no
// output counted, no usage read), for a metrics scrape. A yielding command
// that has not yielded yet is not a job, as in List. Safe for concurrent
// use.
func (h *Jobs) Counts() JobCounts {
	t := &h.s.jobs
	t.mu.Lock()
	jobs := make([]*job, 0, len(t.jobs))
	for _, j := range t.jobs {
		jobs = append(jobs, j)
	}
	t.mu.Unlock()
	var n JobCounts
	for _, j := range jobs {
		if _, ended := j.exited(); ended {
			n.Exited++
			continue
		}
		n.Running++
		if w, _ := j.currentWait(); w != nil {
			n.Waiting++
		}
	}
	return n
}
