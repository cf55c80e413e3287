package main

import "golang.org/x/sys/unix"

// markNonDumpable makes this process non-dumpable. The kernel then checks
// ptrace access (ptrace_may_access) before another process of the same
// user may read /proc/<pid>/environ, mem, maps or fd/, and refuses unless
// the reader has CAP_SYS_PTRACE (root has it); the /proc/<pid> entries then
// belong to root. /proc/<pid>/cmdline is not protected: it stays readable by
// every process (fs/proc/base.c, proc_pid_cmdline_read does no such check),
// which is why --token warns. The flag is reset by execve, so commands are
// dumpable as usual (proc(5) and PR_SET_DUMPABLE in prctl(2)).
func markNonDumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// nonDumpableWorks is whether markNonDumpable protects anything here.
const nonDumpableWorks = true
