//go:build unix

package killtree

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSendSignalIgnoresOnlyESRCH: a process that is gone is no error, any
// other failure is, and the first one reaches ErrNotEmpty's error.
func TestSendSignalIgnoresOnlyESRCH(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := cmd.Process.Pid // reaped: ESRCH, unless the PID was reused meanwhile
	var failed firstErr
	if _, err := sendSignal(gone, 0); err != nil {
		t.Errorf("signal to a reaped process: %v, want nil", err)
	}
	failed.keep(nil)
	_, einval := sendSignal(os.Getpid(), unix.Signal(1000)) // no such signal: EINVAL
	if !errors.Is(einval, unix.EINVAL) {
		t.Fatalf("bad signal: %v, want EINVAL", einval)
	}
	failed.keep(einval)
	failed.keep(errors.New("a later error"))
	err := failed.notEmpty("killtree: %d processes still alive", 2)
	if !errors.Is(err, ErrNotEmpty) || !errors.Is(err, unix.EINVAL) || strings.Contains(err.Error(), "later") {
		t.Errorf("notEmpty = %v, want ErrNotEmpty and the first failure only", err)
	}
	if err := (&firstErr{}).notEmpty("x"); err.Error() != "x: "+ErrNotEmpty.Error() {
		t.Errorf("without a failure: %q", err)
	}
}
