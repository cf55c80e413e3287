package killtree

import "os"

// init turns this process into a reaper (Config.Reaper), a watchdog or a
// memory-limited start (rlimitCmd) when
// it was started as one, before anything else of the program runs: the
// docker reexec model. Both are this binary re-executed through
// /proc/self/exe, named by argv[0] and confirmed by an environment entry
// that only killtree sets. killtree imports only the standard library and
// x/sys, so little ran before it; the packages a program imports beside
// killtree and that sort after it by import path have not run their own
// initialisation yet. It costs every other start of a program that imports
// killtree one comparison.
func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case reaperArg0:
		if fd, ok := os.LookupEnv(reaperEnv); ok && len(os.Args) >= 3 {
			os.Exit(runReaper(fd, os.Args[1], os.Args[2:]))
		}
	case rlimitArg0:
		if os.Getenv(rlimitEnv) == "1" && len(os.Args) >= 4 {
			os.Exit(runRlimit(os.Args[1:]))
		}
	case watchdogArg0:
		if os.Getenv(watchdogEnv) == "1" {
			os.Exit(runWatchdog(os.Args[1:]))
		}
	}
}
