package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
)

// runAsAttacks is a shell script, run as the unprivileged user, that tries
// what a command must not be able to do and prints one word for each
// attempt that worked. Every attempt is expected to fail (what one that
// worked made is named, for the tester to remove).
const runAsAttacks = `
secret=$1 supervisor=$2 freezer=$3
cat "$secret" >/dev/null 2>&1 && echo READ-SECRET
kill -0 $supervisor 2>/dev/null && echo SIGNALLED-SUPERVISOR
cat /proc/$supervisor/environ >/dev/null 2>&1 && echo READ-SUPERVISOR-ENVIRON
for h in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/freezer /sys/fs/cgroup/pids; do
	[ -e $h/cgroup.procs ] && { echo $$ > $h/cgroup.procs; } 2>/dev/null && echo LEFT-CGROUP-$h
done
v2=$(sed -n 's/^0:://p' /proc/self/cgroup)
for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
	[ -n "$v2" ] && [ -e $root$v2/cgroup.freeze ] && { echo 1 > $root$v2/cgroup.freeze; } 2>/dev/null && echo FROZE-OWN-CGROUP
	[ -n "$v2" ] && [ -e $root$v2/cgroup.procs ] && mkdir $root$v2/corral-test-child-$$ 2>/dev/null && echo MADE-CGROUP-$root$v2/corral-test-child-$$
done
[ -n "$freezer" ] && { echo FROZEN > $freezer/freezer.state; } 2>/dev/null && echo FROZE-OTHER
echo done
`

// TestRunAsUser runs commands as nobody on every tier that works here: the
// command runs with nobody's IDs, groups and environment, in a directory it
// may enter, cannot read a root-only file, signal or inspect the
// supervisor, leave or freeze a cgroup, or make one; what it leaves behind
// (one process in its session, one that also scrubs its environment and
// leaves the session) is killed as usual; spill files are still written.
func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running commands as another user needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	freezer := ""
	// A freezer cgroup of someone else's (when the v1 freezer is mounted).
	if d := fmt.Sprintf("/sys/fs/cgroup/freezer/corral-test-runas-%d", os.Getpid()); os.Mkdir(d, 0o755) == nil {
		freezer = d
		t.Cleanup(func() { os.Remove(d) })
	}
	for _, tier := range tiers(t) {
		t.Run(string(tier), func(t *testing.T) {
			s := newSup(t, Config{User: "nobody", Grace: NoGrace, DataDir: t.TempDir(),
				Containment: killtree.Config{Tier: tier}})
			name, dir := s.Bounds().User, s.Bounds().UserDir
			if name != "nobody" || dir == "" {
				t.Fatalf("User() = %q, %q", name, dir)
			}
			res := run(t, s, Request{Command: `id -u; id -g; id -G; echo "$HOME $USER $LOGNAME"; pwd`})
			want := fmt.Sprintf("%s\n%s\n", nobody.Uid, nobody.Gid)
			if !strings.HasPrefix(res.Stdout, want) || !strings.HasSuffix(res.Stdout, fmt.Sprintf("\n%s nobody nobody\n%s\n", nobody.HomeDir, dir)) {
				t.Errorf("stdout %q, want %q, the groups, %q and %q", res.Stdout, want, nobody.HomeDir+" nobody nobody", dir)
			}

			res = run(t, s, Request{Command: "bash -c '" + strings.ReplaceAll(runAsAttacks, "'", `'\''`) + "' - " + secret + " " + fmt.Sprint(os.Getpid()) + " " + freezer})
			if res.Stdout != "done\n" {
				t.Errorf("attacks that worked as nobody:\n%s(stderr %q)", res.Stdout, res.Stderr)
			}

			// The usual way down: what the shell leaves is killed. On the
			// cgroup tiers also a process that leaves the session and
			// scrubs its environment (the marker the test looks for is in
			// its arguments): nobody cannot leave the cgroup.
			tag := fmt.Sprintf("4242.%d%d", os.Getpid(), time.Now().UnixNano()%1e9)
			cmd := "sleep " + tag + " & echo started"
			if tier != killtree.TierPgroup {
				cmd = "(setsid env -i sleep " + tag + "1 &); " + cmd
			}
			res = run(t, s, Request{Command: cmd})
			if res.Stdout != "started\n" || res.Kill.Lingering == 0 {
				t.Errorf("stdout %q, kill %+v", res.Stdout, res.Kill)
			}
			noneWithArg(t, tag)

			res = run(t, s, Request{Command: "seq 1 10000"})
			if res.StdoutInfo.SpillPath == "" {
				t.Fatalf("no spill file: %+v", res.StdoutInfo)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(res.StdoutInfo.SpillPath, &st); err != nil || st.Uid != 0 {
				t.Errorf("spill file %s: owner %d, %v; want root's", res.StdoutInfo.SpillPath, st.Uid, err)
			}
		})
	}
}

// TestRunAsRefused: a Config.User that cannot work fails New with a message
// that says why, and a cwd the user may not enter is an invalid request.
func TestRunAsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		if _, err := New(Config{User: "nobody"}); err == nil || !strings.Contains(err.Error(), "only root can run commands as another user") {
			t.Errorf("New as uid %d: %v", os.Geteuid(), err)
		}
		return
	}
	for _, tc := range []struct{ user, want string }{
		{"no-such-user-corral", `supervisor: run as "no-such-user-corral": user: unknown user no-such-user-corral`},
		{"root", `supervisor: run as "root": that is root`},
		{"0", `supervisor: run as "0": that is root`},
	} {
		if _, err := New(Config{User: tc.user}); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("User %q: %v, want %q", tc.user, err, tc.want)
		}
	}
	s := newSup(t, Config{User: "65534"})
	if s.Bounds().User == "" {
		t.Errorf("a numeric user ID was not resolved")
	}
	_, err := s.Run(context.Background(), Request{Command: "true", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "may not enter it") {
		t.Errorf("a cwd nobody may not enter: %v", err)
	}
}

// noneWithArg fails t if a process whose arguments contain arg is alive,
// and kills it (after checking its arguments again through a pidfd).
func noneWithArg(t *testing.T, arg string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(arg)) {
			continue
		}
		t.Errorf("survivor: pid %s: %q", e.Name(), bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		var pid int
		fmt.Sscan(e.Name(), &pid)
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			if b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); bytes.Contains(b, []byte(arg)) {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			unix.Close(fd)
		}
	}
}

// BenchmarkRunAs: what setting the user, groups and environment costs a
// command (`true` on the pgroup and cgroup2 tiers), against the same
// supervisor without Config.User.
func BenchmarkRunAs(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("running commands as another user needs root")
	}
	for _, tier := range []killtree.Tier{killtree.TierPgroup, killtree.TierCgroup2} {
		for _, name := range []string{"self", "nobody"} {
			b.Run(string(tier)+"/"+name, func(b *testing.B) {
				cfg := Config{Containment: killtree.Config{Tier: tier}}
				if name != "self" {
					cfg.User = name
				}
				s, err := New(cfg)
				if err != nil {
					b.Skip(err)
				}
				defer s.Close()
				for b.Loop() {
					runTrue(b, s)
				}
			})
		}
	}
}

// TestRequestUser: Request.User runs one command as another user, with
// that user's IDs, environment and home as the default directory, and its
// tree is killed whole; the configured user, this process's user and bad
// names are answered as documented.
func TestRequestUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running commands as another user needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	s := newSup(t, Config{})
	res := run(t, s, Request{User: "nobody", Command: `id -un; id -u; echo "$HOME $USER $LOGNAME"; pwd`})
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	wantDir := "/"
	if fi, err := os.Stat(nobody.HomeDir); err == nil && fi.IsDir() {
		wantDir = nobody.HomeDir
	}
	want := []string{"nobody", nobody.Uid, nobody.HomeDir + " nobody nobody", wantDir}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("as nobody: %q (stderr %q), want %q", lines, res.Stderr, want)
	}
	// By number too; and root, the user this process runs as, is itself.
	if res := run(t, s, Request{User: nobody.Uid, Command: "id -un"}); res.Stdout != "nobody\n" {
		t.Errorf("as uid %s: %q", nobody.Uid, res.Stdout)
	}
	if res := run(t, s, Request{User: "root", Command: "id -u"}); res.Stdout != "0\n" {
		t.Errorf("as root, the server's own user: %q", res.Stdout)
	}
	// The next command without a user runs as this process again.
	if res := run(t, s, Request{Command: "id -u"}); res.Stdout != "0\n" {
		t.Errorf("without a user after one: %q", res.Stdout)
	}

	// Its tree goes down whole, a child that left the session included.
	entry, marker := proctest.Marker(t)
	k, v, _ := strings.Cut(entry, "=")
	st, err := s.Jobs().Start(JobRequest{Request: Request{User: "nobody", Env: map[string]string{k: v},
		Command: "setsid sleep 300 & sleep 300"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range proctest.AtLeast(marker, 3, 5*time.Second, nil) {
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d", p.PID), &st); err == nil && fmt.Sprint(st.Uid) != nobody.Uid {
			t.Errorf("%v runs as uid %d, want nobody's %s", p, st.Uid, nobody.Uid)
		}
	}
	if _, err := s.Jobs().Kill(st.ID); err != nil {
		t.Fatal(err)
	}
	proctest.NoSurvivors(t, marker, time.Second)

	for _, tc := range []struct {
		cfg  Config
		user string
		want string
	}{
		{Config{}, "corral-no-such-user-xyz", `user "corral-no-such-user-xyz" does not exist`},
		{Config{User: "nobody"}, "root", `user "root": that is root`},
	} {
		s := newSup(t, tc.cfg)
		_, err := s.Run(t.Context(), Request{User: tc.user, Command: "true"})
		var re *RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config user %q, request user %q: %v, want a RequestError with %q", tc.cfg.User, tc.user, err, tc.want)
		}
	}
}
