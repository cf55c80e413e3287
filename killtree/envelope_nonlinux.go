//go:build !linux

package killtree

// readEnvelope reads nothing outside Linux: no cgroups, and RLIMIT_NPROC
// is not read (the BSDs, macOS and Windows tiers keep their own limits).
func readEnvelope(cfg Config) Envelope { return Envelope{} }

func (e Envelope) refusals() []int64 { return nil }

func holdThreads() {}
