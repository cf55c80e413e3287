package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/shellstate"
)

// TestGateHoldsTheCommand: a journaled command's shell starts beside the
// commit of its entry, but nothing of the command runs before the entry is
// committed: the commit is slowed by 300 ms here, and the command's first
// instruction reads the clock after it. Tracked and untracked commands
// alike; a batch's entries and Argv programs commit before the fork.
func TestGateHoldsTheCommand(t *testing.T) {
	j := openJournal(t, t.TempDir())
	s := newSup(t, Config{Journal: j})
	var mu sync.Mutex
	committed := map[string]time.Time{}
	testHookGateCommitted = func(p *proc) {
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		committed[p.v.Command] = time.Now()
		mu.Unlock()
	}
	t.Cleanup(func() { testHookGateCommitted = nil })
	for _, session := range []string{"", "gated"} {
		cmd := `echo "$EPOCHREALTIME"; [[ -e /dev/fd/5 ]] && echo fd5-open; echo "${CORRAL_GATE-unset}" #` + session
		res := run(t, s, Request{Command: cmd, Session: session})
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if res.ExitCode == nil || *res.ExitCode != 0 || len(lines) != 2 || lines[1] != "unset" {
			t.Fatalf("session %q: exit %v stdout %q stderr %q, want a clock, no fd 5, no CORRAL_GATE", session, res.ExitCode, res.Stdout, res.Stderr)
		}
		sec, err := strconv.ParseFloat(lines[0], 64)
		if err != nil {
			t.Fatal(err)
		}
		ran := time.Unix(0, int64(sec*1e9))
		mu.Lock()
		at, ok := committed[cmd]
		mu.Unlock()
		if !ok {
			t.Fatalf("session %q: the command was not gated", session)
		}
		if ran.Before(at) {
			t.Errorf("session %q: the command ran at %v, %v before its entry was committed", session, ran, at.Sub(ran))
		}
		if res.ID == "" {
			t.Errorf("session %q: no journal entry", session)
		}
	}
	mu.Lock()
	n := len(committed)
	mu.Unlock()
	run(t, s, Request{Argv: []string{"true"}})
	mu.Lock()
	defer mu.Unlock()
	if len(committed) != n {
		t.Error("an Argv program was gated: no script of corral's reads the gate")
	}
}

// TestGateClosedRunsNothing: a shell whose gate closes without the byte
// (the supervisor died before its commit) exits 125 without running the
// command or the command's own BASH_ENV; with the byte it runs both, and
// the gate's descriptor and variable are gone. The script is the one a
// gated untracked command reads, on a real bash.
func TestGateClosedRunsNothing(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	userEnv := filepath.Join(dir, "user-env")
	if err := os.WriteFile(script, []byte(shellstate.Script(false, true)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(userEnv, []byte("touch "+filepath.Join(dir, "user-env-ran")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, open := range []bool{false, true} {
		os.Remove(filepath.Join(dir, "user-env-ran"))
		os.Remove(filepath.Join(dir, "command-ran"))
		f, err := os.Open(script)
		if err != nil {
			t.Fatal(err)
		}
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", `[[ -e /dev/fd/5 ]] && exit 7; touch `+filepath.Join(dir, "command-ran"))
		cmd.Env = append(os.Environ(), shellstate.Env(userEnv, true)...)
		cmd.ExtraFiles = []*os.File{nil, f, r}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		r.Close()
		if open {
			w.Write([]byte{'1'})
		}
		w.Close()
		err = cmd.Wait()
		_, userRan := os.Stat(filepath.Join(dir, "user-env-ran"))
		_, cmdRan := os.Stat(filepath.Join(dir, "command-ran"))
		switch {
		case !open && (cmd.ProcessState.ExitCode() != 125 || userRan == nil || cmdRan == nil):
			t.Errorf("closed gate: exit %d (%v), BASH_ENV ran %v, command ran %v; want 125 and neither", cmd.ProcessState.ExitCode(), err, userRan == nil, cmdRan == nil)
		case open && (err != nil || userRan != nil || cmdRan != nil):
			t.Errorf("open gate: %v, BASH_ENV ran %v, command ran %v; want exit 0 and both", err, userRan == nil, cmdRan == nil)
		}
	}
}
