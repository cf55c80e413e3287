package killtree

import (
	"syscall"
	"time"
)

// rusage is the leader's own CPU times from cmd.Wait (Windows reports no
// descendants there; the job's accounting, jobC.usage, covers them); zero
// until the caller reaped the leader. Windows keeps no peak here.
func (t *Tree) rusage() Usage {
	var u Usage
	if ps := t.cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			u.CPUUser = filetimeDuration(ru.UserTime)
			u.CPUSystem = filetimeDuration(ru.KernelTime)
		}
	}
	return u
}

// filetimeDuration converts a FILETIME duration (100 ns units).
func filetimeDuration(ft syscall.Filetime) time.Duration {
	return time.Duration(int64(ft.HighDateTime)<<32|int64(ft.LowDateTime)) * 100
}
