package killtree

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

func registerHelpers() {
	proctest.Register("supervise", helperSupervise)
	proctest.Register("leavehome", helperLeaveHome)
}

// helperSupervise is a supervisor in a process of its own:
//
//	supervise kill|hang|hang-nowatchdog <tier> <parent> <script> [members]
//
// It starts `bash -c script` in a Manager of that tier, reads the script's
// first output line, waits until the tree has `members` members, and then
// either kills it and prints "report <processes> <escapees> <nanoseconds>",
// or prints "running <watchdog pid>" and hangs (for 60 s at most) until the test kills it.
func helperSupervise(args []string) int {
	if len(args) < 4 {
		fmt.Fprintln(os.Stderr, "supervise kill|hang|hang-nowatchdog <tier> <parent> <script> [members]")
		return 2
	}
	mode, tier, parent, script := args[0], Tier(args[1]), args[2], args[3]
	want := 0
	if len(args) > 4 {
		want, _ = strconv.Atoi(args[4])
	}
	noWatchdog = mode == "hang-nowatchdog"
	m, err := New(Config{Tier: tier, CgroupParent: parent})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer m.Close()
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Stdout, cmd.Stderr = w, w
	tr, err := m.Start(cmd)
	w.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	br := bufio.NewReader(r)
	if _, err := br.ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "no ready line:", err)
		return 1
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, br); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for n, _ := tr.Members(); n < want && time.Now().Before(deadline); n, _ = tr.Members() {
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	if mode != "kill" {
		wd := 0
		if m.plat.wd != nil {
			wd = m.plat.wd.cmd.Process.Pid
		}
		fmt.Printf("running %d\n", wd)
		time.Sleep(60 * time.Second) // the test SIGKILLs us long before
		return 3
	}
	rep, err := tr.Kill()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill:", err)
		return 1
	}
	_ = cmd.Wait()
	<-done
	if err := tr.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	fmt.Printf("report %d %d %d\n", rep.Processes, rep.Escapees, int64(rep.Duration))
	return 0
}

// settle waits until m's preparer is idle: the containments of closed trees
// removed and the next one made (it opens cgroup files meanwhile).
func settle(m *Manager) {
	if m.plat.prep != nil {
		m.plat.prep.idle()
	}
}

// fdCount counts this process's descriptors once m is settled.
func fdCount(t *testing.T, m *Manager) int {
	t.Helper()
	settle(m)
	return proctest.FDCount(t)
}

// rawFd returns f's descriptor without switching it to blocking mode (as
// f.Fd would). It stays valid while f is open.
func rawFd(t testing.TB, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	if err := rc.Control(func(d uintptr) { fd = int(d) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

// spareDirs lists the directories of the prepared containment, if any.
func (p *preparer) spareDirs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		return nil
	}
	return p.next.c.dirs()
}
