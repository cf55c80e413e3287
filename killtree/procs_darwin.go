package killtree

import "golang.org/x/sys/unix"

// sZomb is SZOMB from xnu bsd/sys/proc.h.
const sZomb = 5

// listProcs lists every process with one sysctl(KERN_PROC_ALL). gopsutil's
// darwin backend needs modules this build does not carry, and its Children
// walks all processes per call anyway (docs/killtree.md §5).
func listProcs() ([]uproc, error) {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, err
	}
	out := make([]uproc, 0, len(kps))
	for _, k := range kps {
		out = append(out, uproc{
			pid:    int(k.Proc.P_pid),
			ppid:   int(k.Eproc.Ppid),
			pgid:   int(k.Eproc.Pgid),
			zombie: k.Proc.P_stat == sZomb,
			start:  k.Proc.P_starttime.Sec*1e6 + int64(k.Proc.P_starttime.Usec),
		})
	}
	return out, nil
}
