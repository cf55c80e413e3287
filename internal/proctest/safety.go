package proctest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
)

// ErrNoCgroups reports that no cgroup with a pids limit could be made on this machine; Safe
// skips the test with it.
var ErrNoCgroups = errors.New("proctest: no writable cgroup with a pids controller")

// safetyPrefix begins the name of every safety cgroup.
const safetyPrefix = "corral-safety-"

// safetyName returns a fresh corral-safety-<owner>-<random> name; owner
// (ownerTag) names the test process that made it, so that a later test
// process can tell a leftover of a dead one from a live one's.
func safetyName() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24 and later).
	return safetyPrefix + ownerTag(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// ownerTag is "p<pid>s<start time>" for a live process (its start time in
// clock ticks since boot, field 22 of /proc/PID/stat), so that a reused PID
// never passes for the process that made a cgroup; "" when pid is gone.
func ownerTag(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 20 {
		return ""
	}
	return "p" + strconv.Itoa(pid) + "s" + f[19] // field 22 overall; f[0] is field 3
}
