//go:build unix

package proctest

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// deadlineEnv carries the absolute deadline, in nanoseconds of CLOCK_MONOTONIC, from a bomb or
// escaper root to its descendants. CLOCK_MONOTONIC is system-wide, so every process of a tree
// expires at the same moment however late it was started; Go's own monotonic readings are
// per-process and cannot be passed on. A wall-clock deadline misbehaved in the research runs
// (docs/killtree.md §7), hence the monotonic clock.
const deadlineEnv = "CORRAL_TEST_DEADLINE"

func registerPlatformHelpers() {
	Register("ignoreterm", helperIgnoreTerm)
	Register("killself", helperKillSelf)
	Register("escaper", helperEscaper)
	Register("bomb", helperBomb)
	Register("escaper-writer", helperEscaperWriter)
	Register("bomb-node", helperBombNode)
	Register("dfork", helperDfork)
}

// monoNow reads CLOCK_MONOTONIC.
func monoNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("proctest: clock_gettime: " + err.Error())
	}
	return time.Duration(ts.Nano())
}

// setDeadline stores now+lifetime in this process's environment, which spawn passes on.
func setDeadline(lifetime string) error {
	d, err := seconds(lifetime)
	if err != nil {
		return err
	}
	return os.Setenv(deadlineEnv, strconv.FormatInt(int64(monoNow()+d), 10))
}

// remaining returns the time left until the inherited deadline; it exits 2 if there is none.
func remaining() time.Duration {
	ns, err := strconv.ParseInt(os.Getenv(deadlineEnv), 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "proctest: helper started without %s\n", deadlineEnv)
		os.Exit(2)
	}
	return time.Duration(ns) - monoNow()
}

// spawn re-executes this binary as helper name with args, sharing stdin, stdout and stderr
// and the environment (so the marker and the deadline are inherited); setsid makes the child
// a session leader. argv[0] is "proctest-<name>", so that ps and Proc.Cmdline show which
// helper a process runs. It does not wait for the child.
func spawn(setsid bool, name string, args ...string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	env := []string{HelperEnv + "=" + name}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, HelperEnv+"=") {
			env = append(env, e)
		}
	}
	return syscall.ForkExec(exe, append([]string{"proctest-" + name}, args...), &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setsid: setsid},
	})
}

func helperIgnoreTerm(args []string) int {
	if len(args) != 1 {
		return usage("ignoreterm <sec>")
	}
	d, err := seconds(args[0])
	if err != nil {
		return usage("ignoreterm <sec>: %v", err)
	}
	signal.Ignore(syscall.SIGTERM)
	fmt.Println("ready")
	time.Sleep(d)
	return 0
}

func helperKillSelf(args []string) int {
	if len(args) != 1 {
		return usage("killself <signal-number>")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return usage("killself <signal-number>")
	}
	sig := syscall.Signal(n)
	resetSignal(sig)
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		fmt.Fprintf(os.Stderr, "proctest: killself: %v\n", err)
		return 2
	}
	time.Sleep(5 * time.Second) // Only reached for a signal whose default action is to ignore or stop.
	return 99
}

// helperDfork is the middle of a double fork: started with setsid, it starts helper args[0]
// with the rest of args and exits at once, leaving the grandchild to be reparented.
func helperDfork(args []string) int {
	if len(args) < 1 {
		return usage("dfork <helper> [args...]")
	}
	if _, err := spawn(false, args[0], args[1:]...); err != nil {
		fmt.Fprintf(os.Stderr, "proctest: dfork: %v\n", err)
		return 1
	}
	return 0
}
