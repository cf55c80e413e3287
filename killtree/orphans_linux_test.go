package killtree

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"golang.org/x/sys/unix"
)

// orphanCase is a command that leaves one daemon behind which carries
// nothing of the tree a scan could recognise: it left the session and group,
// replaced its environment (so neither EnvTag nor the test's marker is
// there) and its name, and its parent exited before any sweep. The daemon
// writes its PID to a file; the test takes a pidfd on it, which the command
// cannot scrub, and checks that it is dead after Kill.
type orphanCase struct {
	name string
	// script builds the command; pidfile is where the daemon writes its PID,
	// leave the cgroup.procs files at the hierarchy roots.
	script func(pidfile string, leave []string) string
	// escapes: the daemon also leaves the tree's cgroups (root only), so
	// only a reaper or a sole tree catches it.
	escapes bool
	// needs is a program the case runs, skipped when it is missing.
	needs string
}

// daemon is the env-scrubbed, renamed daemon: it writes its PID, then
// becomes `sleep 60` under the name X.
func daemon(pidfile string) string {
	return `env -i /bin/bash -c 'echo $$ >> ` + pidfile + `; exec -a X sleep ` + lifetime + `'`
}

func orphanCases() []orphanCase {
	return []orphanCase{
		// The hole 1: setsid, env -i, exec -a, parent gone at once.
		{name: "env-i-daemon", script: func(pf string, _ []string) string {
			return `(setsid ` + daemon(pf) + ` </dev/null >/dev/null 2>&1 &); echo hi`
		}},
		// The same through su - (a fresh login environment, another user).
		{name: "su-daemon", needs: "su", script: func(pf string, _ []string) string {
			return `(su -s /bin/bash - nobody -c "setsid ` + strings.ReplaceAll(daemon(pf), `$`, `\$`) +
				` </dev/null >/dev/null 2>&1 &" </dev/null >/dev/null 2>&1); echo hi`
		}},
		// And through runuser -l.
		{name: "runuser-daemon", needs: "runuser", script: func(pf string, _ []string) string {
			return `(runuser -l nobody -s /bin/bash -c "setsid ` + strings.ReplaceAll(daemon(pf), `$`, `\$`) +
				` </dev/null >/dev/null 2>&1 &" </dev/null >/dev/null 2>&1); echo hi`
		}},
		// The hole 2 (root): the daemon also leaves every cgroup
		// of the tree (and the test's safety cgroups) for the roots.
		{name: "root-escape", escapes: true, script: func(pf string, leave []string) string {
			move := ""
			for _, f := range leave {
				move += `echo $$ > ` + f + `; `
			}
			return `(setsid env -i /bin/bash -c '` + move + `echo $$ >> ` + pf + `; exec -a X sleep ` + lifetime +
				`' </dev/null >/dev/null 2>&1 &); echo hi`
		}},
	}
}

// TestOrphans runs the orphan cases on every tier that works here, with
// Config.Reaper, with Config.SoleTree and with Config.OwnProcess (one tree
// at a time here, so the daemon is born while only its tree lives), and, on
// the cgroup tiers, with none for the cases whose daemon stays in the
// cgroup. Without either,
// the pgroup tier does not catch these daemons, nor does any tier catch the
// root escape: that is the boundary doc.go states.
func TestOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the cases switch users and leave cgroups: root only")
	}
	safety := proctest.Safe(t, safetyPids)
	mnt := findMounts()
	var leave []string
	for _, root := range []string{mnt.v2, mnt.v1["pids"], mnt.v1["freezer"]} {
		if root != "" {
			leave = append(leave, filepath.Join(root, "cgroup.procs"))
		}
	}
	modes := []struct {
		name string
		cfg  Config
	}{{"reaper", Config{Reaper: true}}, {"sole", Config{SoleTree: true}}, {"own", Config{OwnProcess: true}}, {"plain", Config{}}}
	for _, tier := range workingTiers(t, safety.Name()) {
		for _, mode := range modes {
			t.Run(string(tier)+"/"+mode.name, func(t *testing.T) {
				cfg := mode.cfg
				cfg.Tier, cfg.CgroupParent, cfg.PidsMax = tier, safety.Name(), safetyPids
				m, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				for _, oc := range orphanCases() {
					if mode.name == "plain" && (tier == TierPgroup || oc.escapes) {
						continue // the documented boundary
					}
					t.Run(oc.name, func(t *testing.T) {
						if oc.needs != "" {
							if _, err := exec.LookPath(oc.needs); err != nil {
								t.Skipf("%s: %v", oc.needs, err)
							}
						}
						runOrphan(t, m, oc, leave)
					})
				}
			})
		}
	}
}

func runOrphan(t *testing.T, m *Manager, oc orphanCase, leave []string) {
	dir := t.TempDir()
	// nobody writes the PID file in the su and runuser cases.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(dir, "pids")
	if err := os.WriteFile(pidfile, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pidfile, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("bash", "-c", oc.script(pidfile, leave))
	cmd.Stdout, cmd.Stderr = w, w
	tr, err := m.Start(cmd)
	w.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var fds []int
	defer func() {
		for _, fd := range fds { // whatever the outcome, nothing outlives the test
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
		}
	}()
	select {
	case <-tr.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("shell did not exit")
	}
	fds = daemonPidfds(t, pidfile)
	// What the supervisor does after the shell exits: a look at the
	// members, then the kill.
	if _, err := tr.Members(); err != nil {
		t.Fatalf("Members: %v", err)
	}
	rep, err := tr.Kill()
	if err != nil {
		t.Fatalf("Kill: %v", err)
	}
	t.Logf("%+v", rep)
	if rep.Processes < 1 {
		t.Errorf("Report.Processes = %d, want ≥ 1 (the daemon)", rep.Processes)
	}
	if oc.escapes && tr.Tier() != TierPgroup && rep.Escapees < 1 {
		t.Errorf("Report.Escapees = %d, want ≥ 1 (it left the cgroup)", rep.Escapees)
	}
	if err := cmd.Wait(); err != nil {
		t.Logf("leader: %v", err) // its status is not under test here
	}
	if code, sig, ok := tr.ShellExit(); tr.hasReaper() && (!ok || code != 0 || sig != 0) {
		t.Errorf("ShellExit = %d, %v, %v; want 0, 0, true", code, sig, ok)
	}
	out, _ := readAllNow(r)
	if !bytes.Contains(out, []byte("hi")) {
		t.Errorf("output %q, want hi", out)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, fd := range fds {
		if !pidfdDead(fd, time.Second) {
			t.Errorf("the daemon (pidfd %d) survived the kill", fd)
		}
	}
	if z := proctest.Zombies(os.Getpid()); len(z) > 0 {
		t.Errorf("zombies left: %v", z)
	}
}

// daemonPidfds waits until the PID file names a PID, and returns a pidfd for
// each PID it names. The daemons live for a minute unless killed, so the
// PIDs name them when the pidfds are taken.
func daemonPidfds(t *testing.T, pidfile string) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			var fds []int
			for _, s := range f {
				pid, err := strconv.Atoi(s)
				if err != nil {
					t.Fatalf("pid file: %q", b)
				}
				fd, err := unix.PidfdOpen(pid, 0)
				if err != nil {
					t.Fatalf("pidfd_open %d: %v (the daemon died before the kill)", pid, err)
				}
				fds = append(fds, fd)
			}
			return fds
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon never wrote its PID")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
}

// pidfdDead reports whether the process of pidfd fd has exited within d.
func pidfdDead(fd int, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(d.Milliseconds()))
	return err == nil && n > 0
}

// readAllNow reads what f holds until EOF, waiting a second at most.
func readAllNow(f *os.File) ([]byte, error) {
	if err := f.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(f)
	return buf.Bytes(), err
}

// TestMatrixReaper runs the matrix scenarios (no bombs) with a reaper on
// every tier: the reaper changes nothing of what the matrix checks.
func TestMatrixReaper(t *testing.T) {
	proctest.Heavy(t)
	safety := proctest.Safe(t, safetyPids)
	mnt := findMounts()
	for _, tier := range workingTiers(t, safety.Name()) {
		t.Run(string(tier), func(t *testing.T) {
			m, err := New(Config{Tier: tier, CgroupParent: safety.Name(), PidsMax: safetyPids, Reaper: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			mig := filepath.Join(mnt.v2, safety.Name())
			if tier == TierCgroup1 {
				mig = filepath.Join(mnt.v1["freezer"], safety.Name())
			}
			for _, sc := range scenarios() {
				if sc.cgroupOnly && tier == TierPgroup {
					continue
				}
				t.Run(sc.name, func(t *testing.T) { runScenario(t, m, sc, mig) })
			}
		})
	}
}

// TestSoleTreeRefusesSecond checks that a sole-tree Manager holds one tree
// at a time.
func TestSoleTreeRefusesSecond(t *testing.T) {
	m, err := New(Config{Tier: TierPgroup, SoleTree: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	first := exec.Command("sleep", "10")
	tr, err := m.Start(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(exec.Command("true")); !errors.Is(err, ErrSoleTree) {
		t.Errorf("second Start = %v, want ErrSoleTree", err)
	}
	if _, err := tr.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	next := exec.Command("true")
	tr, err = m.Start(next)
	if err != nil {
		t.Fatalf("Start after Close = %v", err)
	}
	_, _ = tr.Kill()
	_ = next.Wait()
	_ = tr.Close()
}

// TestOwnProcessAmbiguous: with Config.OwnProcess, a scrubbed daemon born
// while two trees lived is attributed to neither (the boundary doc.go
// states): the tree that started it ends without it and names it as
// Unattributed; the other, ending last, kills it as a stray, counted apart.
// One born after the other tree ended is its tree's again.
func TestOwnProcessAmbiguous(t *testing.T) {
	m, err := New(Config{Tier: TierPgroup, OwnProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	other := exec.Command("sleep", lifetime)
	otherTree, err := m.Start(other)
	if err != nil {
		t.Fatal(err)
	}
	rep, fds := runFastDaemon(t, m)
	defer func() {
		for _, fd := range fds {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			// It is our child (reparented to this subreaper): reap it, so
			// that no later test finds its zombie.
			var info unix.Siginfo
			_ = unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED, nil)
			unix.Close(fd)
		}
		if z := proctest.Zombies(os.Getpid()); len(z) > 0 {
			t.Errorf("zombies left: %v", z)
		}
	}()
	if pidfdDead(fds[0], 200*time.Millisecond) || rep.Processes != 0 {
		t.Errorf("a daemon born while two trees lived was attributed (report %+v)", rep)
	}
	if len(rep.Unattributed) != 1 || rep.Unattributed[0].Comm != "sleep" {
		t.Errorf("Unattributed = %+v, want the daemon (comm sleep)", rep.Unattributed)
	}
	// The other tree ends: the daemon can only have been one of two
	// ended trees', and the last of them kills it as a stray, counted
	// apart from its own processes.
	orep, err := otherTree.Kill()
	if err != nil {
		t.Fatal(err)
	}
	_ = other.Wait()
	if err := otherTree.Close(); err != nil {
		t.Fatal(err)
	}
	if orep.Strays != 1 || orep.Processes != 1 || !pidfdDead(fds[0], time.Second) {
		t.Errorf("the other tree's end: report %+v, daemon dead %v; want 1 stray killed beside its sleep", orep, pidfdDead(fds[0], 0))
	}
	// A daemon born while only its tree lived is that tree's.
	time.Sleep(20 * time.Millisecond) // past the tick the other tree ended in
	rep, fds2 := runFastDaemon(t, m)
	fds = append(fds, fds2...)
	if !pidfdDead(fds2[0], time.Second) || rep.Processes < 1 || rep.Strays != 0 {
		t.Errorf("a daemon born while only its tree lived: report %+v, dead %v", rep, pidfdDead(fds2[0], 0))
	}
}

// TestOwnProcessBackToBack: with Config.OwnProcess, commands run one after
// another, each leaving a scrubbed daemon at once. A command often starts in
// the 10 ms clock tick the previous one ended in, and its daemon is born in
// it too; the ended tree left nothing behind, so the daemon is still its own
// tree's: killed and counted as its process, not as a stray.
func TestOwnProcessBackToBack(t *testing.T) {
	m, err := New(Config{Tier: TierPgroup, OwnProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 30 {
		rep, fds := runFastDaemon(t, m)
		dead := pidfdDead(fds[0], time.Second)
		for _, fd := range fds {
			unix.Close(fd)
		}
		if !dead || rep.Processes < 1 || rep.Strays != 0 || len(rep.Unattributed) != 0 {
			t.Fatalf("command %d: report %+v, daemon dead %v; want it killed as the tree's own", i, rep, dead)
		}
	}
	if z := proctest.Zombies(os.Getpid()); len(z) > 0 {
		t.Errorf("zombies left: %v", z)
	}
}

// runFastDaemon runs, in m, a command that leaves a scrubbed daemon born a
// millisecond or so after its start (setsid -f forks at once and exits),
// kills and closes its tree, and returns the report with pidfds of the
// daemon.
func runFastDaemon(t *testing.T, m *Manager) (Report, []int) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pids")
	if err := os.WriteFile(pidfile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setsid", "-f", "env", "-i", "/bin/sh", "-c", "echo $$ >> "+pidfile+"; exec sleep "+lifetime)
	tr, err := m.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	<-tr.Exited()
	fds := daemonPidfds(t, pidfile)
	rep, err := tr.Kill()
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := tr.Close(); err != nil {
		t.Error(err)
	}
	return rep, fds
}
