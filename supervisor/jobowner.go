package supervisor

import "sort"

// Owner returns the Owner of the request that started job id. The error
// is Get's: ErrNotFound, with ErrJobExpired for a forgotten job.
func (h *Jobs) Owner(id string) (string, error) {
	j, err := h.s.jobs.get(id)
	if err != nil {
		return "", err
	}
	return j.owner, nil
}

// Owned lists the jobs whose Owner is owner, running or retained, oldest
// first.
func (h *Jobs) Owned(owner string) []JobInfo {
	s := h.s
	s.jobs.mu.Lock()
	var jobs []*job
	for _, j := range s.jobs.jobs {
		if j.owner == owner {
			jobs = append(jobs, j)
		}
	}
	s.jobs.mu.Unlock()
	out := make([]JobInfo, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.info())
	}
	sort.Slice(out, func(a, b int) bool { return out[a].StartedAt.Before(out[b].StartedAt) })
	return out
}
