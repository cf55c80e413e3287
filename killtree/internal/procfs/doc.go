// Package procfs reads what killtree needs of the kernel's files: the
// fields of /proc/<pid>/stat, a process's environment, command name and
// cgroups, the list of processes, PID lists such as cgroup.procs and a
// task's children, who holds a given pipe or terminal (the /proc/*/fd
// links), the cgroup mounts in mountinfo, and small procfs and cgroupfs
// files through raw system calls. It holds no state of its own: every
// function reads the kernel's present view, and a process that vanished
// meanwhile reads as not found. Linux only.
package procfs
