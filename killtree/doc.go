// Package killtree starts a command inside a containment and kills its whole
// process tree: every process the command started, however it tried to
// leave (setsid, setpgid, double fork, daemon(3), `timeout`, `set -m`), and
// fork bombs.
//
// # Promises
//
//   - Containment is chosen before the child runs its first instruction
//     (Manager.Start): the child is born inside its cgroup (clone3 with
//     CLONE_INTO_CGROUP, or a fork from a thread already moved into the v1
//     cgroups) or job object (created suspended, assigned, resumed).
//   - A containment is single use: created for one command (on the cgroup
//     tiers ahead of time, in the background, while the previous command
//     runs), destroyed by Tree.Close, never reused (see "Kernel facts").
//   - Tree.Kill returns only once the tree is confirmed empty: no live
//     process of it is left, and every zombie it can attribute to the tree
//     and that was reparented to this process is reaped. It never calls
//     wait4(-1) and never reaps the leader: the caller reaps it with cmd.Wait
//     after Kill, so the leader's process group ID stays reserved for the
//     group kill until then.
//   - Which processes are the tree's (Linux; see "The baseline" for the
//     rules). With Config.Reaper, exactly the descendants of the tree's
//     reaper, on every tier and however many trees run at once: a process
//     that leaves its session, group and cgroups and replaces its
//     environment and name is still found and killed, as long as the reaper
//     lives (see "The reaper"). With Config.SoleTree (one tree per process,
//     as in the CLI), every orphan that reaches this process and is not
//     another tree's leader or a watchdog. With Config.OwnProcess (a
//     process that starts children only through its Manager, as corral
//     serve and corral mcp), every such orphan born while only one tree of
//     the Manager was alive (its start time against the trees' lives, in
//     clock ticks): all of them when commands run one at a time. One born
//     while two trees lived is attributed to neither: the first of them to
//     end names it (Report.Unattributed) and leaves it, and the last kills
//     it (Report.Strays, not counted among its Processes). With none (the
//     default), a
//     process that left the leader's session and group, replaced its
//     environment (`env -i`, `su -`, `runuser -l`), and, on the cgroup
//     tiers, also left the cgroup (root only), and whose parent exited
//     before any sweep saw it, is not attributed: Kill neither kills nor
//     counts it, and only the pipe-holder scan finds it if it holds the
//     output pipes.
//   - Tree.KillBy is Kill with a deadline: past it, it returns an error
//     wrapping ErrNotEmpty and a Report whose Survivors and Alive name what
//     of the tree still lives (Tree.Survivors checks them again later). A
//     member that outlives its SIGKILL has the frozen cgroups holding it
//     thawed (v1 freezer.state, v2 cgroup.freeze) when they are the tree's
//     own: nested in its containment, or holding only its processes. A
//     cgroup that also holds other processes stays frozen, and the member
//     in it is a survivor.
//   - A containment covers the cgroups a root command nests in its leaf:
//     their processes are members, and Close, the watchdog and the stale
//     sweep remove them, children first, after killing what they hold.
//   - Tree.KillPipeHolders is the last resort: whoever still holds a write
//     end of the command's output pipes is killed and counted as an escapee
//     (each process once over the tree's life).
//   - A supervisor that dies, even by SIGKILL, leaves no process of a running
//     command alive for long: on Linux a watchdog process (this binary
//     re-executed, one per Manager, running the stale sweep's Go code)
//     kills every containment of the instance, and every process carrying
//     one of its tags, when its pipe from the supervisor closes (under a
//     second in the tests), and the next New kills and removes the
//     containments of dead instances; on Windows the job's kill-on-close
//     does it. The boundary: a Config.SoleTree Manager (the CLI) on the
//     pgroup tier starts no watchdog, as it has no containment to guard,
//     so the processes of a command whose CLI is SIGKILLed there live on.
//   - A corral run inside a command (a nested corral) dies with that
//     command's tree, and so do its containments: they are made beneath
//     the command's cgroups (see "Names on disk"), so the outer kill, the
//     outer watchdog and the outer removal reach them with the leaf. Where
//     the outer tree has no cgroup in a hierarchy (an outer pgroup tree)
//     the inner containments are siblings of the outer instance: an outer
//     kill ends the inner corral and its watchdog at once, so every Kill
//     that killed something runs the stale sweep (instances whose owner is
//     dead or a zombie), and counts and reaps what it kills there that was
//     reparented to this process. A running Manager also runs that sweep in
//     the background at most every staleEvery, from Start, so a dead
//     instance's containments are ended even when this process kills
//     nothing.
//   - The way down counts a pgroup tree only once it stopped growing
//     (Tree.Stop: SIGSTOP to the group first), and WaitEmpty returns when
//     its context ends, whatever its scan is doing, so neither a fork bomb
//     nor a process held in execve (whose /proc stat read sleeps until the
//     exec is set up) delays the Result by the time a walk of it takes.
//   - A forced tier (Config.Tier, or CORRAL_CONTAINMENT) that does not work
//     here is an error wrapping ErrUnavailable that names the reason; there
//     is no silent fallback. Doctor reports every tier and why.
//
// # Tiers
//
// The strongest tier that works is chosen, and the baseline always runs on
// top of it:
//
//   - cgroup2: a leaf <own v2 cgroup>/<CgroupParent>/<instance>/<n> (see
//     "Names on disk"), killed by
//     writing cgroup.kill (Linux 5.14), which is atomic against forks and
//     migrations; Kill waits for "populated 0" in cgroup.events through
//     inotify. pids.max (Config.PidsMax, default 4096 tasks) is set through
//     the v2 pids controller or, on hybrid hosts whose v2 hierarchy has no
//     controllers, in a v1 pids leaf of the same name; the memory and CPU
//     limits likewise (see "Limits and usage").
//   - cgroup1: a v1 freezer leaf (plus a pids leaf). Kill freezes it, sends
//     SIGKILL to every task, thaws it (v1-frozen tasks do not die until
//     thawed) and repeats until it is empty.
//   - pgroup: the baseline alone, on every Unix; no fork limit.
//   - job: Windows; a job object with kill-on-close, an active-process
//     limit (PidsMax), a memory limit (MemoryMax), and no breakaway. Kill
//     terminates the job and polls until no process is active.
//
// The baseline (Linux): the command leads a new session; this process is a
// child subreaper (PR_SET_CHILD_SUBREAPER, set once by New), so orphans of
// the tree are reparented to it instead of init and stay visible. Kill stops
// the leader's process group (pidfd_send_signal with
// PIDFD_SIGNAL_PROCESS_GROUP on Linux ≥ 6.9, else kill(-pgid) while the
// leader is unreaped; both are atomic against fork inside the group), then
// sweeps: one pass per round over the leader's subtree and this process's
// children (orphans land on its main thread), SIGSTOP every new member and
// scan again
// until none is new, SIGKILL them all, reap, and repeat until none is left.
// A process belongs to the tree when it is the leader, shares its session or
// group (or the session or group of a member seen earlier), was seen as a
// member before (same PID and start time), descends from a member, or is an
// orphan of this process that carries the tree's CORRAL_KILLTREE environment
// entry (which Start adds to the command) or, as a zombie, was listed in the
// tree's cgroup; with Config.SoleTree, any orphan of this process that is not
// another tree's leader or a watchdog; with Config.OwnProcess, such an orphan
// born while this tree was the Manager's only one alive. On the cgroup tiers every process the baseline still finds
// after the cgroup emptied left it (a root command can write its PID into
// another cgroup.procs) and is counted in Report.Escapees; on pgroup the
// escapees are the members outside the leader's process group.
//
// # Limits and usage
//
// A containment caps its tree's memory, CPU time and tasks (Config's
// MemoryMax, CPUs, PidsMax; per command with Manager.StartLimited, which
// rewrites a prepared containment's limit files, or makes a fresh one when
// it lacks a leaf). Each limit goes to the v2 leaf when the v2 hierarchy
// has the controller (memory.max with memory.swap.max 0 and
// memory.oom.group 1, cpu.max, pids.max), else to a v1 leaf of the same
// name joined through the thread trick (memory.limit_in_bytes and
// memory.memsw.limit_in_bytes, cpu.cfs_quota_us, pids.max). v1 has no
// memory.oom.group: an eventfd registered on the leaf's memory.oom_control
// tells the Tree of an OOM, and it kills itself whole at once. On pgroup
// the memory limit is the shell's RLIMIT_AS (set by this binary re-executed
// just before it executes the shell), per process; CPU and pids are not enforced
// (Tree.NotEnforced). Tree.Reached names the limit a tree ran into (an OOM
// kill, a fork refused at pids.max), Tree.Usage what it used: the cgroup's
// accounting where there is one (v2 cpu.stat, v1 cpuacct, memory.peak or
// max_usage_in_bytes of a memory leaf), else the rusage of the reaped
// processes. Doctor says per tier which limits it enforces here.
//
// # The reaper
//
// With Config.Reaper, Start runs the command under a reaper: this binary,
// re-executed through /proc/self/exe, which an init function of this package
// recognises (by its argv[0] and an environment variable it removes before
// the command sees it) before the program's main runs, as docker's reexec
// does; it works the same in a library embedder's binary and in a test
// binary. The reaper makes itself a child subreaper, starts the command as
// its child, reports the shell's wait status through a pipe, reaps every
// orphan and exits once it has no child left. The kernel hands each orphan
// of the tree to its nearest subreaper ancestor (kernel/exit.c,
// find_new_reaper), which is the tree's own reaper: the tree is exactly the
// reaper's descendants, found by walking them. Kill stops them all (and, on
// the cgroup tiers, freezes the cgroup) before any blow can kill the reaper,
// so every one is recorded before its orphans could reach this process.
// The leader (Tree.Pid, the session and group) is then the reaper; Exited and
// Tree.ExitFD report the shell's exit, Tree.ShellExit its status (when the
// reaper lived to report it; else cmd.ProcessState holds the reaper's,
// SIGKILL), Report leaves the reaper out, and Members counts it only until it
// has reported the shell's exit (so that a wait for the tree to empty after
// SIGTERM waits for that report).
//
// Why it is not the default: a Go runtime start per command costs about as
// much as the `bash -c true` it wraps (BenchmarkOverheadRatio, the -reaper
// rows), against a 1.10× target. Why not more: Go can neither set
// PR_SET_CHILD_SUBREAPER between fork and exec nor fork without exec, and a
// shell made a subreaper hands its orphans on to this process the moment it
// exits. A PID namespace per command (the kernel kills it all when its init
// exits) was weighed and not taken: it needs root or a user namespace, its
// init (the shell) is immune to the SIGTERM of the graceful phase, the host's
// /proc it sees names the wrong PIDs to ps, pgrep and kill, and what the
// shell leaves behind dies with it, uncounted, instead of lingering for the
// settle.
//
// The boundary: the reaper runs as the command's user, so a command can
// SIGKILL it (it is the shell's parent); what is left then reaches this
// process as orphans and the default rules apply.
//
// On macOS and the BSDs there is no subreaper: the baseline follows the
// session, the group and the descendants of every process seen, and a
// process that leaves the session and loses its parent before a sweep sees
// it is out of reach. There is no pipe-holder scan there.
//
// # Kernel facts
//
// On Linux 6.18 a clone3(CLONE_INTO_CGROUP) into a cgroup that once received
// cgroup.kill yields a child SIGKILLed at birth: the kill_seq snapshot is
// taken from the parent's cgroup before the target is known, and
// cgroup_post_fork (kernel/cgroup/cgroup.c) kills a child whose snapshot
// differs from its cgroup's (docs/killtree.md §2.5, experiment E6b). Doctor
// reports whether this kernel has it; either way containments are never
// reused.
//
// # Names on disk
//
// Containments are <own>/<CgroupParent>/<pid>-<start time>/<n> in every
// hierarchy used (cgroup2, and v1 freezer and pids), so the stale sweep can
// tell a live owner from a dead one across PID reuse. <own> is the cgroup
// this process was in, in that hierarchy, when it first looked (at the
// first New or Doctor; later moves by an outside agent are not followed):
// a corral inside a container, a service or another corral's command nests
// its containments in that outer cgroup, so the outer cgroup.kill, freezer
// and limits hold them. A CgroupParent beginning with "/" is taken from the
// hierarchy's root instead. The stale sweep looks only beneath the same
// <own>/<CgroupParent>: at the instances of corrals started in the same
// cgroup. An inner corral's containments are in an outer one's leaf (the
// outer kill and removal reach them), and an inner corral never sees an
// outer one's.
//
// On cgroup v2, the controllers the leaves get (pids) are those listed in
// <own>'s cgroup.controllers. The kernel enables none below a non-root
// cgroup that holds processes ("no internal processes", cgroup-v2.rst): when
// this process is alone in <own>, it moves itself into the leaf
// <own>/<CgroupParent>/<instance>/supervisor the first time a controller is
// needed (systemd's delegated-subgroup pattern) and stays there; the
// watchdog and the stale sweep never kill that leaf, and the sweep removes
// it once empty. When other processes share <own>, they are not moved, and
// the leaves get no v2 controller (Doctor says why). When no leaf can be
// made beneath <own>, the cgroup tier fails its self-test (Doctor names the
// directory) rather than fall back to the root, outside the outer cgroup.
// The boundary is the outer cgroup's: a root command can write its PID into
// any cgroup.procs and leave it, as it can leave its own leaf.
//
// # Concurrency
//
// Manager and Tree are safe for concurrent use. On Linux a Tree runs a
// goroutine (the leader's exit watcher, waiting in the runtime's poller) only
// once Tree.Exited is called, and it ends in Tree.Close; elsewhere the
// watcher runs from Start. On the cgroup tiers a Manager runs one more (the
// preparer of the next containment) that ends in Manager.Close.
package killtree
