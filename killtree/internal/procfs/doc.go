// Package procfs reads what killtree needs of the kernel's files: the
// fields of /proc/<pid>/stat, a process's environment, the list of
// processes, PID lists such as cgroup.procs and a task's children, and
// small procfs and cgroupfs files through raw system calls. It holds no
// state of its own: every function reads the kernel's present view, and a
// process that vanished meanwhile reads as not found. Linux only.
package procfs
