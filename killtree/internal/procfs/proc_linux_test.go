package procfs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		text string
		want Stat
		ok   bool
	}{
		// A plain line (fields 3 to 22).
		{"plain", "42 (sleep) S 7 42 40 0 -1 4194560 92 0 0 0 0 0 0 0 20 0 1 0 123456 5000 100",
			Stat{Pid: 42, PPid: 7, Pgid: 42, Sid: 40, State: 'S', Threads: 1, Start: 123456}, true},
		// A command name with spaces and parentheses: the fields start after the last ')'.
		{"comm with ) (", "9 (a) b (c) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 3 0 77 0 0",
			Stat{Pid: 9, PPid: 1, Pgid: 9, Sid: 9, State: 'Z', Threads: 3, Start: 77}, true},
		// Cut short: not a stat line.
		{"short", "9 (x) S 1 2 3", Stat{}, false},
		// No command name at all.
		{"no paren", "9 x S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", Stat{}, false},
	} {
		got, ok := ParseStat(tc.want.Pid, []byte(tc.text))
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: ParseStat = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	t.Parallel()
	s, ok := ReadStat(os.Getpid(), make([]byte, 1024))
	if !ok || s.PPid != os.Getppid() || s.Zombie() || s.Start == 0 || s.Threads < 1 {
		t.Fatalf("ReadStat(self) = %+v, %v", s, ok)
	}
	if _, ok := ReadStat(1<<22+1, nil); ok { // above pid_max's ceiling: never a process
		t.Error("ReadStat of a PID that cannot exist succeeded")
	}
}

func TestParsePids(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"", nil},                           // an empty cgroup.procs
		{"1\n22\n333\n", []int{1, 22, 333}}, // cgroup.procs
		{"5 6 7 ", []int{5, 6, 7}},          // a children file
		{"8", []int{8}},                     // no trailing separator
	} {
		if got := ParsePids([]byte(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("ParsePids(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestEnviron: a child's environment entries are found exactly, by prefix,
// and a process that does not exist has none.
func TestEnviron(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"PROCFS_TEST=one.7", "OTHER=x"}
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if !EnvironHas(pid, "PROCFS_TEST=one.7") || EnvironHas(pid, "PROCFS_TEST=one") {
		t.Error("EnvironHas: the exact entry only")
	}
	if !EnvironHasPrefix(pid, "PROCFS_TEST=one.", nil) || EnvironHasPrefix(pid, "PROCFS_TEST=two.", nil) {
		t.Error("EnvironHasPrefix: the prefix only")
	}
	if EnvironHas(1<<22+1, "PROCFS_TEST=one.7") || EnvironHasPrefix(1<<22+1, "P", nil) {
		t.Error("a process that cannot exist has an environment")
	}
	pids, err := Pids()
	if err != nil || !slices.Contains(pids, pid) || !slices.Contains(pids, os.Getpid()) {
		t.Errorf("Pids() misses the child or this process: %v", err)
	}
	own, err := ReadFile("/proc/self/cgroup", nil)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(strings.TrimSpace(string(own)), "\n", 2)[0]
	if _, leaf, _ := strings.Cut(line, "::"); leaf != "" && !InCgroup(pid, leaf) {
		t.Errorf("InCgroup(child, %q) = false: it inherited this process's cgroup", leaf)
	}
}

// TestFile: a kept file re-reads from offset 0, writes in one write, and
// fails with fs.ErrClosed after Close instead of using a reused descriptor.
func TestFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, "HE"); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if b, err := f.ReadAll(make([]byte, 2)); err != nil || string(b) != "HEllo" {
			t.Errorf("ReadAll = %q, %v; want HEllo (grown from a 2-byte buffer, from offset 0 each time)", b, err)
		}
	}
	if f.Path() != path {
		t.Errorf("Path() = %q", f.Path())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := f.ReadAll(nil); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("ReadAll after Close: %v, want fs.ErrClosed", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v, want fs.ErrNotExist", err)
	}
}
