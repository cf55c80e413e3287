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

// bombWidth is the most children a bounded bomb process starts.
const bombWidth = 4

// helperBomb runs bomb.c (docs/killtree.md §9), compiled with the system C compiler, in
// place of this process. Without a C compiler it falls back to re-execution: Go cannot fork
// without exec, so every process of the bomb is then this binary running helper bomb-node.
func helperBomb(args []string) int {
	if len(args) < 2 || len(args) > 3 || !validBombMode(args[1]) {
		return usage("bomb <sec> plain|setsid|dfork [maxProcs]")
	}
	if err := setDeadline(args[0]); err != nil {
		return usage("bomb: %v", err)
	}
	// One P per process keeps a bomb process at about three threads instead of four to seven,
	// so more processes fit under pids.max (which counts threads).
	if err := os.Setenv("GOMAXPROCS", "1"); err != nil {
		return fail("bomb", err)
	}
	budget := "-"
	if len(args) == 3 {
		if n, err := strconv.Atoi(args[2]); err != nil || n < 1 {
			return usage("bomb: maxProcs must be a positive number")
		}
		budget = args[2]
	}
	execCBomb(args[1], budget) // returns only without a C compiler
	return bombNode(args[1], budget, true)
}

func validBombMode(m string) bool { return m == "plain" || m == "setsid" || m == "dfork" }

// helperBombNode is one process of the bomb: bomb-node <mode> <budget|->.
func helperBombNode(args []string) int {
	if len(args) != 2 || !validBombMode(args[0]) {
		return usage("bomb-node plain|setsid|dfork <budget|->")
	}
	return bombNode(args[0], args[1], false)
}

// bombNode starts this process's children, then sleeps until the deadline. SIGCHLD is ignored
// so exited children (and dfork's middle processes) are reaped by the kernel, as in bomb.c.
func bombNode(mode, budget string, root bool) int {
	signal.Ignore(syscall.SIGCHLD)
	if budget == "-" {
		bombUnbounded(mode, root)
		return 0
	}
	n, err := strconv.Atoi(budget)
	if err != nil || n < 1 {
		return usage("bomb-node: bad budget %q", budget)
	}
	rest := n - 1 // One process of the budget is this one.
	k := min(bombWidth, rest)
	started := 0
	for i := range k {
		share := rest / k
		if i < rest%k {
			share++
		}
		if !spawnBombChild(mode, strconv.Itoa(share)) {
			break // Deadline passed.
		}
		started++
	}
	if root {
		fmt.Printf("ready %d\n", started)
	}
	time.Sleep(remaining())
	return 0
}

// bombUnbounded starts children until the deadline; root announces the first bombWidth.
func bombUnbounded(mode string, root bool) {
	for started := 0; ; started++ {
		if root && started == bombWidth {
			fmt.Printf("ready %d\n", started)
		}
		if !spawnBombChild(mode, "-") {
			return
		}
	}
}

// spawnBombChild starts one bomb child in the given mode, retrying with a backoff of 1 ms
// doubling to 100 ms while spawning fails (pids.max, RLIMIT_NPROC). It reports false if the
// deadline passed first.
func spawnBombChild(mode, budget string) bool {
	backoff := time.Millisecond
	for {
		left := remaining()
		if left <= 0 {
			return false
		}
		var err error
		switch mode {
		case "plain":
			_, err = spawn(false, "bomb-node", mode, budget)
		case "setsid":
			_, err = spawn(true, "bomb-node", mode, budget)
		case "dfork":
			_, err = spawn(true, "dfork", "bomb-node", mode, budget)
		}
		if err == nil {
			return true
		}
		time.Sleep(min(backoff, left))
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}
