package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestRunInterrupted: SIGINT or SIGTERM to corral run while its command
// runs ends the command's whole tree, prints the summary ("interrupted")
// and exits 130; nothing with the test's marker is left. corral installs its
// handler beside its start-up (notifyInterrupts), and the command starts
// only once it is in place, so an interrupt during the command is always
// one the summary tells.
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	bin := corralBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			entry, marker := proctest.Marker(t)
			defer proctest.NoSurvivors(t, marker, 5*time.Second)
			cmd := exec.Command(bin, "run", "--grace", "0", "--timeout", "60", "--",
				`(sleep 100 &) ; setsid sleep 100 & echo started; exec sleep 100`)
			cmd.Env = append(os.Environ(), entry, "CORRAL_DATA_DIR="+filepath.Join(t.TempDir(), "data"))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "started\n" {
				_ = cmd.Process.Kill()
				t.Fatalf("first line %q, want started", line)
			}
			if got := proctest.AtLeast(marker, 3, 5*time.Second, nil); len(got) < 3 {
				t.Errorf("control: %d marked processes before the signal, want 3: %v", len(got), got)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("corral run still running 10 s after %v", sig)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("after %v: %v, want exit 130", sig, err)
			}
			if !strings.Contains(stderr.String(), "corral: interrupted (") {
				t.Errorf("after %v: stderr %q, want the summary of an interrupted command", sig, stderr.String())
			}
			if left := proctest.Survivors(marker); len(left) > 0 {
				t.Errorf("after %v: %d marked processes left: %v", sig, len(left), left)
			}
		})
	}
}

// TestRunInterruptedAtStart: a SIGTERM that reaches corral run at any
// moment of its start-up (from as early as the test can send it after the
// exec, to 2 ms later) leaves nothing of the command running. Before the
// handler is in place corral dies of it, and then its command has not
// started (the file the command writes first does not exist); after, the
// command is killed and corral exits 130.
func TestRunInterruptedAtStart(t *testing.T) {
	t.Parallel()
	bin := corralBinary(t)
	entry, marker := proctest.Marker(t)
	defer proctest.NoSurvivors(t, marker, 5*time.Second)
	data := filepath.Join(t.TempDir(), "data")
	died := 0
	for i := range 20 {
		ran := filepath.Join(t.TempDir(), "ran")
		cmd := exec.Command(bin, "run", "--grace", "0", "--timeout", "60", "--", `: > `+ran+`; setsid sleep 100 & exec sleep 100`)
		cmd.Env = append(os.Environ(), entry, "CORRAL_DATA_DIR="+data)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Spread the signals over the start-up: none at first, then up
		// to 2 ms later.
		time.Sleep(time.Duration(i) * 100 * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			killed := errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM
			if !killed && (ee == nil || ee.ExitCode() != 130) {
				t.Errorf("run %d: %v, want exit 130 or death by SIGTERM", i, err)
			}
			if killed {
				died++
				if _, err := os.Stat(ran); err == nil {
					t.Errorf("run %d: corral died of the signal after its command had started: the handler came too late", i)
				}
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("run %d: corral run still running 10 s after SIGTERM", i)
		}
	}
	t.Logf("%d of 20 runs died of the signal, the others exited 130", died)
	// The watchdogs of the runs that died of the signal are at work for a
	// moment longer: NoSurvivors waits for them.
}
