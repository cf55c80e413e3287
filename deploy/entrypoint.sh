#!/bin/bash
# corral's container entrypoint: prepares the cgroup2 tier when the
# container may use it, then execs corral (PID 1 stays corral, so SIGTERM
# reaches it directly).
#
# A container with a cgroup namespace of its own (Docker and containerd on a
# cgroup v2 host, the default) sees its cgroup as the root of /sys/fs/cgroup,
# and its processes live in it. A cgroup that holds processes may not enable a
# controller for its children (Documentation/admin-guide/cgroup-v2.rst, "No
# Internal Process Constraint"; only the host's root cgroup is exempt), and
# corral enables the pids controller from the mount's root down to its
# containments (<mount>/corral/<instance>/<n>) when the v2 hierarchy has it.
# So when that mount is cgroup2, writable, and this process sits at its root,
# every process of the root moves into the child cgroup "supervisor" first,
# as the entrypoint of moby's docker-in-docker image does (hack/dind).
#
# Anywhere else (a read-only mount, a non-root user, cgroup v1, the host's
# cgroup namespace) it changes nothing, and corral picks the strongest tier
# that works, as `corral doctor` shows.
set -euo pipefail

cg=${CORRAL_CGROUP_FS:-/sys/fs/cgroup}

if [ -f "$cg/cgroup.subtree_control" ] && [ -w "$cg/cgroup.procs" ] &&
	grep -qx '0::/' /proc/self/cgroup; then
	if mkdir -p "$cg/supervisor" 2>/dev/null; then
		# A process that exited since the list was read cannot be moved;
		# any other failure shows up in corral doctor's cgroup2 line.
		while read -r pid; do
			echo "$pid" >"$cg/supervisor/cgroup.procs" 2>/dev/null || true
		done <"$cg/cgroup.procs"
	else
		echo "corral-entrypoint: cannot make $cg/supervisor; corral may fall back to the pgroup tier (corral doctor says why)" >&2
	fi
fi

exec corral "$@"
