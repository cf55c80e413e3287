package main

import (
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"

	"github.com/corral-sh/corral/killtree"
)

// guarantee is one promise of docs/boundary.md and whether it
// holds for commands in one configuration.
type guarantee struct {
	promise string
	holds   bool
	why     string
}

// whoRuns says as whom commands run: the server's own user, which may be
// root, or another user through --run-as.
type whoRuns struct {
	root  bool   // the server (this process) is root
	runAs string // the --run-as user, "" for none
}

// boundary lists which of docs/boundary.md's guarantees hold for a command run in
// tier by the configuration w. It states only what the code enforces.
func boundary(tier killtree.Tier, w whoRuns) []guarantee {
	other := w.root && w.runAs != ""  // another, unprivileged user
	asRoot := w.root && w.runAs == "" // the command is root
	cgroup := tier == killtree.TierCgroup2 || tier == killtree.TierCgroup1
	g := make([]guarantee, 0, 5)
	add := func(promise string, holds bool, why string) {
		g = append(g, guarantee{promise, holds, why})
	}

	switch {
	case other && cgroup:
		add("nothing it starts outlives the call", true, "it cannot leave its cgroup (the cgroup files are root's), and the cgroup is killed whole")
	case asRoot:
		add("nothing it starts outlives the call", false, "a root command can leave its cgroup, session and environment; --run-as USER closes that")
	case cgroup:
		add("nothing it starts outlives the call", false, "the cgroups belong to the command's own user, so it may move itself out of its cgroup; then only its session, group and descent are followed")
	default:
		if runtime.GOOS == "linux" {
			add("nothing it starts outlives the call", false, "the pgroup tier follows the session, the group and descent, and takes every orphan born while only one command ran: a process that leaves them, clears its environment and loses its parent before a sweep, while another command runs, outlives its command until the last of those commands ends (--reaper closes that)")
		} else {
			add("nothing it starts outlives the call", false, "the pgroup tier follows the session, the group and descent: a process that leaves them, clears its environment and loses its parent before a sweep can escape")
		}
	}

	switch {
	case other:
		add("cannot read the server's token", true, "the token file is the server's (mode 0600) and the server is another user; a --token on the command line is readable by everyone")
	case asRoot:
		add("cannot read the server's token", false, "root reads every file and every process's memory")
	default:
		add("cannot read the server's token", false, "a command runs as the server's user and may read what it reads, the token file included")
	}

	switch {
	case other:
		add("cannot read the server's environment or memory", true, "the server is another user")
	case asRoot:
		add("cannot read the server's environment or memory", false, "root has CAP_SYS_PTRACE, which non-dumpable does not stop")
	case nonDumpableWorks:
		add("cannot read the server's environment or memory", true, "corral serve is non-dumpable: /proc/<pid>/environ, mem and fd are closed to its own user (cmdline is not)")
	default:
		add("cannot read the server's environment or memory", false, "no non-dumpable flag on this system")
	}

	switch {
	case other:
		add("cannot signal the server", true, "the server is another user (commands of the same --run-as user can signal each other)")
	default:
		add("cannot signal the server", false, "a command runs as the server's user, or as root")
	}

	switch {
	case other:
		add("cannot freeze processes or make cgroups", true, "every cgroup file is root's")
	case asRoot:
		add("cannot freeze processes or make cgroups", false, "root writes any cgroup file")
	default:
		add("cannot freeze processes or make cgroups", false, "any cgroup the server's user owns (a delegated subtree, the containment itself) is the command's too")
	}
	return g
}

// currentWho is the configuration doctor reports on: this process's user,
// and the --run-as user when it is one serve would accept.
func currentWho(runAs string) (whoRuns, string, error) {
	w := whoRuns{root: os.Geteuid() == 0}
	if runAs == "" {
		return w, "", nil
	}
	u, err := user.Lookup(runAs)
	if _, unknown := err.(user.UnknownUserError); unknown {
		if _, nerr := strconv.ParseUint(runAs, 10, 32); nerr == nil {
			u, err = user.LookupId(runAs)
		}
	}
	switch {
	case err != nil:
		return w, "", fmt.Errorf("--run-as %q: %w", runAs, err)
	case u.Uid == "0":
		return w, "", fmt.Errorf("--run-as %q: that is root; run as an unprivileged user, or not at all", runAs)
	case !w.root:
		return w, fmt.Sprintf("--run-as %s needs root (this process runs as uid %d): serve, run and mcp would refuse to start; without it:", runAs, os.Geteuid()), nil
	}
	w.runAs = u.Username
	return w, "", nil
}
