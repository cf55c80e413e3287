//go:build linux

package benchkit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
)

// CgroupParentEnv tells a kill-latency helper the safety cgroup it runs in,
// for a contender that makes cgroups of its own (corral) to nest them there.
const CgroupParentEnv = "BENCHKIT_CGROUP_PARENT"

// safetyPids caps the safety cgroup of the kill benchmark: the tree's
// TreeProcs single-threaded processes, the helper's threads, and room.
const safetyPids = 4000

// BenchKill runs the kill-latency helper registered as helper (its body
// calls KillHelper for one contender) once per iteration inside a fresh
// safety cgroup, and reports: stop-ms, the mean time from the stop to the
// contender's call returning (HungAfter when it did not return); hung, the
// fraction of calls still blocked after HungAfter; survivors, the mean
// number of the tree's processes alive after the call returned or hung.
// Survivors are then killed by marker, and zombies left to this process are
// reaped, before the next iteration.
func BenchKill(b *testing.B, helper string) {
	safety := proctest.Safe(b, safetyPids)
	var ms, hung, survivors float64
	n := 0
	for b.Loop() {
		entry, value := proctest.Marker(b)
		argv, env := proctest.Argv(helper, entry)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env, CgroupParentEnv+"="+safety.Name())
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := safety.Start(cmd); err != nil {
			b.Fatalf("start %s: %v", helper, err)
		}
		err := cmd.Wait()
		left := len(proctest.Survivors(value))
		KillMarked(value)
		ReapZombies()
		var stopMs, returned int
		if _, perr := fmt.Sscan(out.String(), &stopMs, &returned); err != nil || perr != nil {
			b.Fatalf("%s: %v %v; stdout %q stderr %q", helper, err, perr, out.String(), errb.String())
		}
		ms += float64(stopMs)
		hung += float64(1 - returned)
		survivors += float64(left)
		n++
	}
	b.ReportMetric(ms/float64(n), "stop-ms")
	b.ReportMetric(hung/float64(n), "hung")
	b.ReportMetric(survivors/float64(n), "survivors")
}

// BenchPeakRSS runs the peak-RSS helper registered as helper (its body
// calls RSSHelper for one contender) on a flood of n bytes once per
// iteration and reports peak-MB, the helper's mean VmHWM in MiB.
func BenchPeakRSS(b *testing.B, helper string, n int64) {
	var total float64
	k := 0
	for b.Loop() {
		argv, env := proctest.Argv(helper, fmt.Sprint(n))
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		var kb int64
		if _, perr := fmt.Sscan(string(out), &kb); err != nil || perr != nil {
			b.Fatalf("%s: %v %v; stderr %q", helper, err, perr, errb.String())
		}
		total += float64(kb) / 1024
		k++
	}
	b.ReportMetric(total/float64(k), "peak-MB")
	ReportFlood(b, n)
}

// KillMarked SIGKILLs every process carrying the marker value, by PID through
// a pidfd, until none is left or ten seconds have passed.
func KillMarked(value string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		left := proctest.Survivors(value)
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			fd, err := unix.PidfdOpen(p.PID, 0)
			if err != nil {
				continue // ESRCH: already gone.
			}
			// Check the marker again now that the PID cannot be reused under us.
			if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID)); err == nil &&
				strings.Contains("\x00"+string(env), "\x00"+proctest.MarkerEnv+"="+value+"\x00") {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) // ESRCH: exited meanwhile.
			}
			unix.Close(fd)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReapZombies reaps, by PID, the zombie children of this process: orphans
// of a killed tree that were reparented to it (it is a child subreaper once
// it made a corral Supervisor). Call it only when no exec.Cmd of this
// process is between its child's exit and Wait.
func ReapZombies() {
	for _, z := range proctest.Zombies(os.Getpid()) {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(z.PID, &ws, unix.WNOHANG, nil) // An error means it is gone.
	}
}
