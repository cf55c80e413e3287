package killtree

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchdogScript is the watchdog: one bash process per Manager, in its own
// session and outside every containment. Its arguments are the pattern
// (grep -E, one environment entry) of this instance's EnvTag and the
// instance's directories, one per cgroup hierarchy. It reads its stdin and
// does nothing until EOF (the supervisor exited or was killed): then it kills
// every leaf under those directories — cgroup.kill, or freeze, kill, thaw —
// except the supervisor's own leaf (see leaveHome), where it may live
// itself; then every process still carrying one of the instance's tags (processes
// that left their cgroup or had none), removes the leaves and exits. "quit"
// ends it without killing anything. It needs no message per command: every
// containment of the instance is under its directories, and every command's
// tag starts with the instance's name, so nothing started is ever outside
// its reach, not even between a start and a registration.
const watchdogScript = `
while IFS= read -r line; do
	[ "$line" = quit ] && exit 0
done
pat=$1
shift
# walk D sets subs to the cgroups nested in D, children before parents: a
# root command can make cgroups inside its leaf.
walk() {
	local x
	for x in "$1"/*/; do
		x=${x%/}
		[ -d "$x" ] || continue
		walk "$x"
		subs+=("$x")
	done
}
for inst in "$@"; do
	for d in "$inst"/*/; do
		d=${d%/}
		[ -d "$d" ] && [ "${d##*/}" != supervisor ] || continue
		subs=()
		walk "$d"
		if [ -e "$d/cgroup.kill" ]; then
			echo 1 > "$d/cgroup.kill"
			for s in "${subs[@]}"; do echo 0 > "$s/cgroup.freeze"; done 2>/dev/null
		fi
		if [ -e "$d/freezer.state" ]; then
			for i in 1 2 3 4 5 6 7 8 9 10; do
				echo FROZEN > "$d/freezer.state"
				p=$(cat "$d/cgroup.procs" "${subs[@]/%//cgroup.procs}" 2>/dev/null)
				[ -n "$p" ] && kill -9 $p 2>/dev/null
				echo THAWED > "$d/freezer.state"
				for s in "${subs[@]}"; do echo THAWED > "$s/freezer.state"; done 2>/dev/null
				[ -z "$p" ] && break
			done
		fi
	done
done
for i in 1 2 3 4 5 6 7 8 9 10; do
	hits=$(grep -lzE "$pat" /proc/[0-9]*/environ 2>/dev/null)
	[ -z "$hits" ] && break
	for f in $hits; do p=${f#/proc/}; kill -9 ${p%/environ} 2>/dev/null; done
done
for inst in "$@"; do
	for d in "$inst"/*/; do
		d=${d%/}
		[ -d "$d" ] && [ "${d##*/}" != supervisor ] || continue
		subs=()
		walk "$d"
		for s in "${subs[@]}" "$d"; do
			for i in 1 2 3 4 5 6 7 8 9 10; do rmdir "$s" 2>/dev/null && break; sleep 0.05; done
		done
	done
	rmdir "$inst" 2>/dev/null
done
exit 0
`

// watchdog is the handle on the watchdog process; a nil *watchdog (no bash)
// does nothing.
type watchdog struct {
	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser // guarded by mu; nil once closed
}

// startWatchdog starts the watchdog of instance inst, whose containments
// live under dirs. Without bash there is none: crash safety then rests on
// the stale sweep at the next start.
func startWatchdog(inst string, dirs []string) (*watchdog, error) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, nil
	}
	// inst is "<pid>-<start time>": digits and a hyphen, nothing a regular
	// expression would read as an operator.
	pat := "^" + EnvTag + "=" + inst + `\.[0-9]+$`
	args := append([]string{"--noprofile", "--norc", "-c", watchdogScript, "corral-watchdog", pat}, dirs...)
	cmd := exec.Command(bash, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("killtree: watchdog: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("killtree: watchdog: %w", err)
	}
	ownChildren.Store(cmd.Process.Pid, struct{}{})
	return &watchdog{cmd: cmd, stdin: w}, nil
}

// close ends the watchdog without letting it kill anything and reaps it.
func (w *watchdog) close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	stdin := w.stdin
	w.stdin = nil
	w.mu.Unlock()
	if stdin == nil {
		return nil
	}
	_, _ = io.WriteString(stdin, "quit\n") // EPIPE: it is already gone
	err := stdin.Close()
	werr := w.cmd.Wait()
	ownChildren.Delete(w.cmd.Process.Pid)
	return errors.Join(err, werr)
}

var instanceRE = regexp.MustCompile(`^([0-9]+)-([0-9]+)$`)

// sweepStale kills and removes the containments of instances under parent
// whose owner is no longer alive (a crashed supervisor; docs/killtree.md
// §8.1 step 7): cgroup.kill or freeze-kill-thaw on every leaf, then rmdir. It
// returns the PIDs it found in those leaves (a PID may appear once per
// hierarchy). It looks only where this process places its own instances
// (place): the instances of corrals that live in the same cgroup. An inner
// corral's instances, nested in an outer one's leaf, are the outer leaf's
// (its kill reaches them, its removal removes them), and an inner corral
// never sees an outer one's. A dead instance's supervisor leaf (leaveHome)
// is removed once empty, never killed: what it holds is no containment's.
func sweepStale(mnt *mounts, parent string) []int {
	var found []int
	for _, root := range mnt.roots() {
		base := mnt.place(root, parent)
		ents, err := os.ReadDir(base)
		if err != nil {
			continue
		}
		for _, e := range ents {
			m := instanceRE.FindStringSubmatch(e.Name())
			if !e.IsDir() || m == nil || ownerAlive(m[1], m[2]) {
				continue
			}
			inst := filepath.Join(base, e.Name())
			leaves, _ := os.ReadDir(inst)
			for _, l := range leaves {
				if l.IsDir() && l.Name() == supervisorLeaf {
					_ = unix.Rmdir(filepath.Join(inst, l.Name())) // EBUSY: something lives there still; so does the instance directory
					continue
				}
				if l.IsDir() {
					found = append(found, killStaleLeaf(filepath.Join(inst, l.Name()))...)
				}
			}
			_ = unix.Rmdir(inst) // EBUSY: a leaf would not die; the next sweep retries
		}
	}
	return found
}

// ownerAlive reports whether the process pid runs with the given start
// time. A zombie owner is dead: it runs no code, and when it was killed
// together with its watchdog (a corral nested in another one's cgroup,
// ended by that one's cgroup.kill), nothing else ends its containments.
func ownerAlive(pid, start string) bool {
	p, err := strconv.Atoi(pid)
	if err != nil {
		return false
	}
	st, ok := readStat(p, make([]byte, 1024))
	return ok && !st.zombie() && strconv.FormatUint(st.start, 10) == start
}

// killStaleLeaf kills what a stale leaf and the cgroups nested in it hold
// (thawing those that froze themselves), removes them, children first, and
// returns the PIDs it found there.
func killStaleLeaf(dir string) []int {
	var found []int
	switch {
	case fileExists(filepath.Join(dir, "cgroup.kill")):
		found, _ = readPidsTree(dir)
		_ = writeFile(filepath.Join(dir, "cgroup.kill"), "1")
		thawNested(dir)
		_ = pollUntilTimeout(time.Second, func() bool { return !populated(filepath.Join(dir, "cgroup.events")) })
	case fileExists(filepath.Join(dir, "freezer.state")):
		found, _ = (&cgroup1{freezer: dir}).kill(time.Now().Add(time.Second))
	default: // a pids-only leaf: whatever is left escaped the other cgroups
		_ = pollUntilTimeout(time.Second, func() bool {
			p, _ := readPidsTree(dir)
			for _, pid := range p {
				_ = unix.Kill(pid, unix.SIGKILL) // ESRCH: gone meanwhile
			}
			found = append(found, p...)
			return len(p) == 0
		})
	}
	_ = rmTree(dir)
	return found
}

// reapStale reaps those of pids (found by sweepStale, killed) that are
// zombie children of this process and owned by no tree or watchdog here:
// processes of a dead instance reparented to this subreaper. It waits for
// each at most a second.
func reapStale(pids []int) {
	buf := make([]byte, 1024)
	deadline := time.Now().Add(time.Second)
	for _, pid := range pids {
		for {
			p, ok := readStat(pid, buf)
			if !ok || p.ppid != selfPid || ownedElsewhere(pid) {
				break
			}
			if p.zombie() { // a zombie's PID cannot have been reused
				var ws unix.WaitStatus
				if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid || (err != nil && !errors.Is(err, unix.EINTR)) {
					break // reaped, or not ours to reap (ECHILD)
				}
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond) // a killed process on its way out; not synchronisation
		}
	}
}

// sweepDeadInstances runs the stale sweep from a tree's way down, so that
// the containments of a corral instance that died with this tree (a corral
// run inside the command) die with it too: an outer cgroup.kill ends the
// inner corral and its watchdog at once, while the inner command lives in a
// cgroup of its own, outside the outer containment, and would otherwise
// live until the next New anywhere. The processes it killed that were
// reparented to this process (their corral was a descendant of ours) are
// the tree's: they are marked for reaping and returned; what it killed of
// other dead instances is not counted.
func (t *Tree) sweepDeadInstances() []int {
	var ours []int
	buf := make([]byte, 1024)
	seen := map[int]bool{}
	for _, pid := range sweepStale(t.m.plat.mnt, t.m.plat.cfg.CgroupParent) {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if p, ok := readStat(pid, buf); ok && p.ppid == selfPid && !ownedElsewhere(pid) {
			ours = append(ours, pid)
		}
	}
	t.mu.Lock()
	for _, pid := range ours {
		t.st.dead[pid] = true
	}
	t.mu.Unlock()
	return ours
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func pollUntilTimeout(d time.Duration, done func() bool) error {
	ctx, cancel := contextUntil(time.Now().Add(d))
	defer cancel()
	return pollUntil(ctx, done)
}
