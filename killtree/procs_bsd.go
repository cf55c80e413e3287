//go:build unix && !linux && !darwin

package killtree

// listProcs is not implemented on this system (x/sys has no portable process
// listing and gopsutil's BSD backends need modules this build does not carry):
// the sweep finds nothing and the tier is reduced to the group kill.
func listProcs() ([]uproc, error) { return nil, nil }
