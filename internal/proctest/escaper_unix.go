//go:build unix

package proctest

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// helperEscaper starts the three writers of escaper.c (docs/killtree.md §9) and exits.
// It waits for the double fork's middle process, so that "started" means all three writers
// exist.
func helperEscaper(args []string) int {
	if len(args) != 1 {
		return usage("escaper <sec>")
	}
	if err := setDeadline(args[0]); err != nil {
		return usage("escaper <sec>: %v", err)
	}
	if _, err := spawn(false, "escaper-writer", "plain"); err != nil {
		return fail("escaper", err)
	}
	if _, err := spawn(true, "escaper-writer", "setsid"); err != nil {
		return fail("escaper", err)
	}
	mid, err := spawn(true, "dfork", "escaper-writer", "daemon")
	if err != nil {
		return fail("escaper", err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(mid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		return fail("escaper", fmt.Errorf("double fork: %v %v", err, ws))
	}
	fmt.Println("started")
	return 0
}

// helperEscaperWriter writes "<tag> <pid> alive\n" to fd 1 every 100 ms until the deadline.
// SIGPIPE is ignored and the write goes straight to the system call, so a closed pipe costs
// it nothing (os.File would raise SIGPIPE for fd 1 itself; see os/signal, "SIGPIPE").
func helperEscaperWriter(args []string) int {
	if len(args) != 1 {
		return usage("escaper-writer <tag>")
	}
	signal.Ignore(syscall.SIGPIPE)
	line := []byte(args[0] + " " + strconv.Itoa(os.Getpid()) + " alive\n")
	for {
		left := remaining()
		if left <= 0 {
			return 0
		}
		_, _ = syscall.Write(1, line) // EPIPE is expected once the reader is gone.
		time.Sleep(min(left, 100*time.Millisecond))
	}
}

// fail reports a helper's failure on stderr; exit code 1.
func fail(helper string, err error) int {
	fmt.Fprintf(os.Stderr, "proctest: %s: %v\n", helper, err)
	return 1
}
