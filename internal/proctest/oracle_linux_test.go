package proctest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startHelper starts helper name with args and the marker entry; stdout goes to a pipe whose
// read end is returned. The caller waits for cmd.
func startHelper(t *testing.T, marker, name string, args ...string) (*exec.Cmd, *bufio.Reader, *os.File) {
	t.Helper()
	argv, env := Argv(name, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), env, marker)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { r.Close() })
	return cmd, bufio.NewReader(r), r
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	s, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read line: %q, %v", s, err)
	}
	return strings.TrimSuffix(s, "\n")
}

// TestEscaper checks that escaper leaves three marked writers behind in the right sessions,
// that Survivors finds them, and that they expire by themselves (stdout reaches EOF).
func TestEscaper(t *testing.T) {
	t.Parallel()
	entry, value := Marker(t)
	cmd, out, _ := startHelper(t, entry, "escaper", "1.5")
	for readLine(t, out) != "started" { // Writers may print before the parent does.
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("escaper parent: %v", err)
	}
	// A writer still between its fork and its exec shows no environment
	// yet: wait up to a second for all three.
	procs := Survivors(value)
	for deadline := time.Now().Add(time.Second); len(procs) < 3 && time.Now().Before(deadline); procs = Survivors(value) {
		time.Sleep(10 * time.Millisecond) // polling /proc; not synchronisation
	}
	if len(procs) != 3 {
		t.Fatalf("Survivors: %d processes, want 3: %v", len(procs), procs)
	}
	sessionLeaders := 0
	for _, p := range procs {
		if p.PPID == os.Getpid() || p.Zombie() {
			t.Errorf("writer %v: want reparented and alive", p)
		}
		if sid, _ := unix.Getsid(p.PID); sid == p.PID {
			sessionLeaders++
		}
	}
	if sessionLeaders != 1 { // setsid is a leader; daemon's session belongs to its dead parent.
		t.Errorf("%d session leaders among writers, want 1", sessionLeaders)
	}
	tags := map[string]bool{}
	for len(tags) < 3 {
		f := strings.Fields(readLine(t, out))
		if len(f) != 3 || f[2] != "alive" {
			t.Fatalf("bad writer line %q", f)
		}
		tags[f[0]] = true
	}
	if !tags["plain"] || !tags["setsid"] || !tags["daemon"] {
		t.Errorf("tags %v, want plain, setsid, daemon", tags)
	}
	// The writers hold the pipe until their deadline; EOF proves all three expired.
	done := make(chan error, 1)
	go func() {
		_, err := out.WriteTo(discard{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("drain: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("escaper writers did not expire within 10 s")
	}
	NoSurvivors(t, value, 2*time.Second)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// fakeTB records Errorf calls instead of failing the real test.
type fakeTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// TestNoSurvivorsReportsAndKills checks that a live marked process fails the check, is named
// in the report and is SIGKILLed afterwards.
func TestNoSurvivorsReportsAndKills(t *testing.T) {
	t.Parallel()
	entry, value := Marker(t)
	cmd, out, _ := startHelper(t, entry, "ignoreterm", "30")
	readLine(t, out) // "ready": the helper runs with the marker in its environ.
	fake := &fakeTB{TB: t}
	NoSurvivors(fake, value, 30*time.Millisecond)
	if len(fake.errs) != 1 || !strings.Contains(fake.errs[0], "pid "+strconv.Itoa(cmd.Process.Pid)+" ") {
		t.Errorf("reports %q, want one naming pid %d", fake.errs, cmd.Process.Pid)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("helper ended with %v, want SIGKILL", err)
	}
}

// TestNoSurvivorsPassesWhenGone checks that a marked process that exits within the window
// passes, so the check is not a rubber stamp in either direction.
func TestNoSurvivorsPassesWhenGone(t *testing.T) {
	t.Parallel()
	entry, value := Marker(t)
	cmd, _, _ := startHelper(t, entry, "sleep", "0.2")
	fake := &fakeTB{TB: t}
	// Unreaped, the helper turns into a zombie, whose environ is empty, so the check passes
	// without anyone waiting for it.
	NoSurvivors(fake, value, 5*time.Second)
	if len(fake.errs) != 0 {
		t.Errorf("unexpected reports %q", fake.errs)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("sleep helper: %v", err)
	}
}

// TestIgnoreTerm checks that ignoreterm really ignores SIGTERM at the kernel level.
func TestIgnoreTerm(t *testing.T) {
	t.Parallel()
	entry, value := Marker(t)
	cmd, out, _ := startHelper(t, entry, "ignoreterm", "30")
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		NoSurvivors(t, value, time.Second)
	}()
	readLine(t, out)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var ign uint64
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			ign, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if ign&(1<<(syscall.SIGTERM-1)) == 0 {
		t.Errorf("SigIgn %x lacks SIGTERM", ign)
	}
}

func TestKillSelf(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGQUIT, syscall.SIGKILL} {
		argv, env := Argv("killself", strconv.Itoa(int(sig)))
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(cmd.Environ(), env)
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != sig {
			t.Errorf("killself %v: %v, want death by the signal", sig, err)
		}
	}
}

// TestCommandUnderBash checks the shell form runs the helper.
func TestCommandUnderBash(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("bash", "-c", Command("lines", "2")+" | wc -l").Output()
	if err != nil || strings.TrimSpace(string(out)) != "2" {
		t.Errorf("bash -c %q: %q, %v", Command("lines", "2"), out, err)
	}
}

// TestZombies makes a zombie child (exited, not yet reaped) and finds it.
func TestZombies(t *testing.T) {
	t.Parallel()
	argv, env := Argv("exit", "0")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), env)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	// WNOWAIT leaves the child a zombie until cmd.Wait reaps it.
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, z := range Zombies(os.Getpid()) {
		found = found || z.PID == cmd.Process.Pid
	}
	if !found {
		t.Errorf("zombie %d not found in %v", cmd.Process.Pid, Zombies(os.Getpid()))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, z := range Zombies(os.Getpid()) {
		if z.PID == cmd.Process.Pid {
			t.Errorf("reaped child %d still reported", z.PID)
		}
	}
}

func TestFDCountAndThreads(t *testing.T) {
	// Not parallel: other tests open and close pipes.
	// The first file the process opens also starts the runtime poller (epoll and eventfd), so
	// warm it up before counting.
	if f, err := os.Open(os.DevNull); err == nil {
		f.Close()
	}
	before := FDCount(t)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if got := FDCount(t); got != before+1 {
		t.Errorf("with one more file: %d, want %d", got, before+1)
	}
	f.Close()
	if got := FDCount(t); got != before {
		t.Errorf("after close: %d, want %d", got, before)
	}
	if n := Threads(); n < 1 {
		t.Errorf("Threads() = %d", n)
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want Proc
		ok   bool
	}{
		// Ordinary line.
		{"12 (bash) S 1 12 12 0", Proc{PID: 12, PPID: 1, State: "S", Comm: "bash"}, true},
		// comm with spaces and parentheses ends at the last ')'.
		{"12 (a) b (c)) Z 7 1", Proc{PID: 12, PPID: 7, State: "Z", Comm: "a) b (c)"}, true},
		// Truncated line.
		{"12 (x) R", Proc{}, false},
		// No comm.
		{"garbage", Proc{}, false},
	}
	for _, tc := range tests {
		got, err := parseStat(12, tc.line)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseStat(%q) = %v, %v; want %v, ok %v", tc.line, got, err, tc.want, tc.ok)
		}
	}
}
