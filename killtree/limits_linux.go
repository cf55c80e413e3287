package killtree

import (
	"errors"
	"fmt"
	"github.com/corral-sh/corral/killtree/internal/procfs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// cgLimits is the memory and CPU part of a cgroup containment (pids stays
// where it was: cgroup2_linux.go, cgroup1_linux.go) and its accounting.
// Each limit goes to the v2 leaf when the v2 hierarchy has the controller,
// else to a v1 leaf of the same name, joined through the thread trick like
// the pids leaf. A v1 memory leaf is made only when a memory limit applies:
// every removed memory cgroup lingers in the kernel while page cache is
// still charged to it, so a leaf per command for accounting alone would pile
// them up.
type cgLimits struct {
	v2     string // the v2 leaf when the tier is cgroup2, else ""
	v2mem  bool   // memory.max is in the v2 leaf
	v2cpu  bool   // cpu.max is in the v2 leaf
	v2pids bool   // pids.max is in the v2 leaf
	mem    string // v1 memory leaf, or ""
	cpu    string // v1 cpu leaf, or ""
	acct   string // v1 cpuacct leaf (cgroup1 tier: CPU accounting), or ""
	pids   string // v1 pids leaf, or ""
	// canMem, canCPU and canPids say whether this host has a place for the
	// limit in this tier, so that retune asks for a fresh containment only
	// when one would enforce more.
	canMem, canCPU, canPids bool

	mu         sync.Mutex
	lim        Limits // as written; guarded by mu
	pidsEvents int64  // pids.events "max" before the cgroup1 kill lowered pids.max to 0; -1: not taken; guarded by mu
}

// cfsPeriod is the CFS period written with a CPU quota (v1
// cpu.cfs_period_us, v2 cpu.max): the kernel's default, 100 ms.
const cfsPeriod = 100000

// makeLimits makes the leaves and writes the memory and CPU limits of cfg
// for the containment rel (cgroup2 tier: v2 is its v2 leaf). It returns the
// v1 leaves a start joins; on error the caller destroys them with its own.
func (l *cgLimits) makeLimits(mnt *mounts, cfg Config, inst, rel string) ([]v1leaf, error) {
	l.pidsEvents = -1
	l.lim = Limits{MemoryBytes: max(cfg.MemoryMax, 0), CPUs: max(cfg.CPUs, 0), Pids: max(cfg.PidsMax, 0)}
	l.canMem = l.v2 != "" && mnt.v2ctrl["memory"] || mnt.v1["memory"] != ""
	l.canCPU = l.v2 != "" && mnt.v2ctrl["cpu"] || mnt.v1["cpu"] != ""
	l.canPids = l.v2 != "" && mnt.v2ctrl["pids"] || mnt.v1["pids"] != ""
	var leaves []v1leaf
	var ctrls []string
	if l.v2 != "" && cfg.MemoryMax > 0 && mnt.v2ctrl["memory"] {
		l.v2mem = true
		ctrls = append(ctrls, "memory")
	}
	if l.v2 != "" && cfg.CPUs > 0 && mnt.v2ctrl["cpu"] {
		l.v2cpu = true
		ctrls = append(ctrls, "cpu")
	}
	if len(ctrls) > 0 {
		if err := enableControllers(mnt.v2, cfg.CgroupParent, inst, ctrls); err != nil {
			return nil, err
		}
	}
	add := func(ctrl string) (string, error) {
		for _, lf := range leaves { // co-mounted controllers (cpu,cpuacct) share a leaf
			if lf.root == mnt.v1[ctrl] {
				return lf.dir, nil
			}
		}
		lf, err := mkV1Leaf(ctrl, mnt.v1[ctrl], rel)
		if err != nil {
			return "", err
		}
		leaves = append(leaves, lf)
		return lf.dir, nil
	}
	var err error
	if cfg.MemoryMax > 0 && !l.v2mem && mnt.v1["memory"] != "" {
		if l.mem, err = add("memory"); err != nil {
			return leaves, err
		}
	}
	if cfg.CPUs > 0 && !l.v2cpu && mnt.v1["cpu"] != "" {
		if l.cpu, err = add("cpu"); err != nil {
			return leaves, err
		}
	}
	if l.v2 == "" && mnt.v1["cpuacct"] != "" {
		if l.acct, err = add("cpuacct"); err != nil {
			return leaves, err
		}
	}
	if err := l.writeMemory(l.lim.MemoryBytes, -1); err != nil {
		return leaves, err
	}
	return leaves, l.writeCPU(l.lim.CPUs)
}

// writeMemory writes the memory limit (0: none); was is the limit in force
// before (-1: none yet), which orders the v1 writes.
func (l *cgLimits) writeMemory(bytes, was int64) error {
	switch {
	case l.v2mem:
		v := "max"
		if bytes > 0 {
			v = strconv.FormatInt(bytes, 10)
		}
		if err := writeFile(filepath.Join(l.v2, "memory.max"), v); err != nil {
			return err
		}
		// No swap: a tree over its limit is killed, not slowed to a crawl
		// (memory.swap.max is absent without swap accounting).
		if _, err := os.Stat(filepath.Join(l.v2, "memory.swap.max")); err == nil {
			if err := writeFile(filepath.Join(l.v2, "memory.swap.max"), "0"); err != nil {
				return err
			}
		}
		// The OOM killer ends the whole cgroup, not one process of it
		// (cgroup-v2.rst, memory.oom.group).
		return writeFile(filepath.Join(l.v2, "memory.oom.group"), "1")
	case l.mem != "":
		v := "-1"
		if bytes > 0 {
			v = strconv.FormatInt(bytes, 10)
		}
		files := []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}
		if was >= 0 && (bytes == 0 || bytes > was) {
			// memsw.limit_in_bytes may not be below limit_in_bytes:
			// raise memsw first, lower it last (cgroup-v1/memory.rst 2.5).
			files[0], files[1] = files[1], files[0]
		}
		for _, f := range files {
			p := filepath.Join(l.mem, f)
			if err := writeFile(p, v); err != nil && !(f == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist)) {
				return err // memsw is absent without swap accounting
			}
		}
	}
	return nil
}

// liftCPU removes the CPU quota of a containment whose kill has begun. A
// dying process needs the CPU to exit (tearing down its memory: about 1 ms
// a process on a small VM), and a quota throttles the way down as it did
// the work: 84 processes under 0.1 CPU ended 1.35 s past their deadline
// with it kept. Lifted, the tree runs unthrottled only to its end: on v2
// after cgroup.kill, on v1 for the few milliseconds before the freezer
// stops it (a throttled task would also be slow to freeze). Errors are
// ignored: the kill goes on either way.
func (l *cgLimits) liftCPU() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lim.CPUs > 0 {
		_ = l.writeCPU(0)
		l.lim.CPUs = 0
	}
}

// writeCPU writes the CPU quota (0: none).
func (l *cgLimits) writeCPU(cpus float64) error {
	quota := int64(math.Round(cpus * cfsPeriod))
	switch {
	case l.v2cpu:
		v := "max " + strconv.Itoa(cfsPeriod)
		if cpus > 0 {
			v = strconv.FormatInt(max(quota, 1000), 10) + " " + strconv.Itoa(cfsPeriod)
		}
		return writeFile(filepath.Join(l.v2, "cpu.max"), v)
	case l.cpu != "":
		v := "-1"
		if cpus > 0 {
			v = strconv.FormatInt(max(quota, 1000), 10)
		}
		if err := writeFile(filepath.Join(l.cpu, "cpu.cfs_period_us"), strconv.Itoa(cfsPeriod)); err != nil {
			return err
		}
		return writeFile(filepath.Join(l.cpu, "cpu.cfs_quota_us"), v)
	}
	return nil
}

// retune rewrites the limits of a prepared containment to want, and
// reports false when it lacks a leaf that want needs (the caller then makes
// a fresh one). writePids writes the pids limit (0: none) where the tier
// keeps it.
func (l *cgLimits) retune(want Limits, writePids func(int) error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	have := l.lim
	if want == have {
		return true
	}
	if want.MemoryBytes > 0 && l.canMem && !l.v2mem && l.mem == "" ||
		want.CPUs > 0 && l.canCPU && !l.v2cpu && l.cpu == "" ||
		want.Pids > 0 && l.canPids && !l.v2pids && l.pids == "" {
		return false
	}
	if want.MemoryBytes != have.MemoryBytes {
		was := have.MemoryBytes
		if was == 0 {
			was = -1
		}
		if l.writeMemory(want.MemoryBytes, was) != nil {
			return false
		}
	}
	if want.CPUs != have.CPUs && l.writeCPU(want.CPUs) != nil {
		return false
	}
	if want.Pids != have.Pids && writePids(want.Pids) != nil {
		return false
	}
	l.lim = want
	return true
}

// oomEventFD registers an eventfd for the v1 memory leaf's OOM
// notifications (cgroup.event_control with memory.oom_control,
// cgroup-v1/memory.rst section 10) and returns it, or nil when the leaf
// has no memory limit or the registration fails (the OOM is then still
// read from memory.oom_control afterwards, and the rest of the tree dies
// at the timeout or the shell's exit instead of at once).
func (l *cgLimits) oomEventFD() readCloser {
	if l.mem == "" || l.lim.MemoryBytes == 0 {
		return nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil
	}
	ofd, err := procfs.OpenFD(filepath.Join(l.mem, "memory.oom_control"), unix.O_RDONLY)
	if err != nil {
		unix.Close(efd)
		return nil
	}
	// The registration holds its own references to both files; ours to
	// memory.oom_control can go at once.
	err = procfs.WriteFile(filepath.Join(l.mem, "cgroup.event_control"), strconv.Itoa(efd)+" "+strconv.Itoa(ofd))
	unix.Close(ofd)
	if err != nil {
		unix.Close(efd)
		return nil
	}
	return os.NewFile(uintptr(efd), "oom-eventfd") // non-blocking: reads wait in the runtime's poller
}

// notePidsEvents records pids.events "max" of the v1 pids leaf before a
// kill lowers pids.max to 0 (cgroup1's fork barrier), whose refusals are
// not the command's.
func (l *cgLimits) notePidsEvents() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pids != "" && l.pidsEvents < 0 {
		l.pidsEvents = eventCount(filepath.Join(l.pids, "pids.events"), "max")
	}
}

// reached reads the containment's event counters.
func (l *cgLimits) reached() Limit {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.v2mem && eventCount(filepath.Join(l.v2, "memory.events"), "oom_kill") > 0:
		return LimitMemory
	case l.mem != "" && eventCount(filepath.Join(l.mem, "memory.oom_control"), "oom_kill") > 0:
		return LimitMemory
	case l.lim.Pids == 0:
		return ""
	case l.v2pids && eventCount(filepath.Join(l.v2, "pids.events"), "max") > 0:
		return LimitPids
	case l.pids != "":
		n := l.pidsEvents
		if n < 0 {
			n = eventCount(filepath.Join(l.pids, "pids.events"), "max")
		}
		if n > 0 {
			return LimitPids
		}
	}
	return ""
}

// usage reads the containment's accounting.
func (l *cgLimits) usage() Usage {
	var u Usage
	switch {
	case l.v2 != "":
		// cpu.stat's usage fields are cgroup core files, there without
		// the cpu controller (cgroup-v2.rst, "cpu.stat").
		text := readFileOr(filepath.Join(l.v2, "cpu.stat"))
		user, uok := fieldValue(text, "user_usec")
		sys, sok := fieldValue(text, "system_usec")
		if uok && sok {
			u.CPUUser, u.CPUSystem = time.Duration(user)*time.Microsecond, time.Duration(sys)*time.Microsecond
			u.CPUFromCgroup = true
		}
	case l.acct != "":
		user, uerr := strconv.ParseInt(strings.TrimSpace(readFileOr(filepath.Join(l.acct, "cpuacct.usage_user"))), 10, 64)
		sys, serr := strconv.ParseInt(strings.TrimSpace(readFileOr(filepath.Join(l.acct, "cpuacct.usage_sys"))), 10, 64)
		if uerr == nil && serr == nil {
			u.CPUUser, u.CPUSystem = time.Duration(user), time.Duration(sys)
			u.CPUFromCgroup = true
		}
	}
	switch {
	case l.v2mem:
		if n, err := strconv.ParseInt(strings.TrimSpace(readFileOr(filepath.Join(l.v2, "memory.peak"))), 10, 64); err == nil {
			u.PeakMemory, u.MemoryFromCgroup = n, true
		}
	case l.mem != "":
		if n, err := strconv.ParseInt(strings.TrimSpace(readFileOr(filepath.Join(l.mem, "memory.max_usage_in_bytes"))), 10, 64); err == nil {
			u.PeakMemory, u.MemoryFromCgroup = n, true
		}
	}
	return u
}

// eventCount returns the value of key in a flat-keyed cgroup file
// ("key value" lines), or 0.
func eventCount(path, key string) int64 {
	n, _ := fieldValue(readFileOr(path), key)
	return n
}

// fieldValue returns the value of key in "key value" lines.
func fieldValue(text, key string) (int64, bool) {
	for text != "" {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// enforces reports which limits the platform's tier enforces here.
func (p *platform) enforces() (memory, cpus, pids bool) {
	return tierEnforces(p.tier, p.mnt)
}

// tierEnforces reports which limits tier enforces on a host with mnt.
func tierEnforces(tier Tier, mnt *mounts) (memory, cpus, pids bool) {
	switch tier {
	case TierCgroup2:
		return mnt.v2ctrl["memory"] || mnt.v1["memory"] != "", mnt.v2ctrl["cpu"] || mnt.v1["cpu"] != "", mnt.v2ctrl["pids"] || mnt.v1["pids"] != ""
	case TierCgroup1:
		return mnt.v1["memory"] != "", mnt.v1["cpu"] != "", mnt.v1["pids"] != ""
	case TierPgroup:
		return true, false, false
	}
	return false, false, false
}

// limitsDoc says, for Doctor, how tier enforces each limit on a host with
// mnt, or why it does not.
func limitsDoc(tier Tier, mnt *mounts) []LimitStatus {
	v2 := func(ctrl string) bool { return mnt.v2 != "" && mnt.v2ctrl[ctrl] }
	v1 := func(ctrl string) bool { return mnt.v1[ctrl] != "" }
	pick := func(kind Limit, v2file, v1file, ctrl string, tierV2 bool) LimitStatus {
		switch {
		case tierV2 && v2(ctrl):
			return LimitStatus{Limit: kind, Enforced: true, How: v2file + " (cgroup v2)"}
		case v1(ctrl):
			return LimitStatus{Limit: kind, Enforced: true, How: v1file + " (v1 " + ctrl + " leaf)"}
		case tierV2:
			return LimitStatus{Limit: kind, How: "no " + ctrl + " controller in cgroup v2 nor a v1 " + ctrl + " hierarchy"}
		}
		return LimitStatus{Limit: kind, How: "no v1 " + ctrl + " hierarchy"}
	}
	switch tier {
	case TierCgroup2, TierCgroup1:
		isV2 := tier == TierCgroup2
		return []LimitStatus{
			pick(LimitMemory, "memory.max, swap 0, oom.group", "memory.limit_in_bytes (+memsw); v1 has no oom.group: corral kills the tree at the OOM notification", "memory", isV2),
			pick(LimitCPUs, "cpu.max", "cpu.cfs_quota_us", "cpu", isV2),
			pick(LimitPids, "pids.max", "pids.max", "pids", isV2),
		}
	case TierPgroup:
		return []LimitStatus{
			{Limit: LimitMemory, Enforced: true, How: "RLIMIT_AS per process, not per tree (best effort)"},
			{Limit: LimitCPUs, How: "no CPU quota without cgroups"},
			{Limit: LimitPids, How: "no fork limit without cgroups"},
		}
	}
	return []LimitStatus{
		{Limit: LimitMemory, How: "Windows only"}, {Limit: LimitCPUs, How: "Windows only"}, {Limit: LimitPids, How: "Windows only"},
	}
}

// rlimitArg0 and rlimitEnv name a start through this binary re-executed
// (/proc/self/exe) that sets its own RLIMIT_AS and then executes the
// command in place: [rlimitArg0, bytes, path, argv...] with rlimitEnv=1.
const (
	rlimitArg0 = "corral-rlimit"
	rlimitEnv  = "CORRAL_KILLTREE_RLIMIT"
)

// rlimitCmd makes cmd start with RLIMIT_AS set to bytes before the
// command's first instruction (the pgroup tier's memory limit), so that
// nothing it forks escapes the limit: the start goes through this binary
// re-executed (rlimitArg0), which sets the limit on itself and executes
// cmd.Path with cmd.Args. A prlimit after the start left a window in which
// the shell forked unlimited children (TestMemoryLimit saw a 2 GiB
// allocation succeed under -race). bytes ≤ 0 leaves cmd alone.
func rlimitCmd(cmd *exec.Cmd, bytes int64) error {
	if bytes <= 0 {
		return nil
	}
	if cmd.Err != nil {
		return cmd.Err
	}
	cmd.Args = append([]string{rlimitArg0, strconv.FormatInt(bytes, 10), cmd.Path}, cmd.Args...)
	cmd.Path = "/proc/self/exe"
	cmd.Env = append(cmd.Environ(), rlimitEnv+"=1")
	return nil
}

// runRlimit is the re-executed start of rlimitCmd: it sets RLIMIT_AS to
// args[0] bytes and executes args[1] with argv args[2:] and this process's
// environment less rlimitEnv. It returns only on failure: 126 as a shell
// does for a program it cannot execute, with the reason on stderr.
func runRlimit(args []string) int {
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err == nil {
		lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
		err = unix.Setrlimit(unix.RLIMIT_AS, &lim)
	}
	if err == nil {
		env := slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, rlimitEnv+"=") })
		err = unix.Exec(args[1], args[2:], env)
	}
	fmt.Fprintf(os.Stderr, "corral: cannot start %s under its memory limit: %v\n", args[1], err)
	return 126
}
