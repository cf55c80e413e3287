package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TestRunTTYOnATerminal: corral run --tty with a terminal as its stdin,
// stdout and controlling terminal, as a person runs it: the command's
// terminal has the caller's size (stty size), a resize of the caller's
// terminal reaches it, the caller's terminal is in raw mode while it runs
// (so Ctrl-C is typed into the command's terminal and kills its sleep by
// SIGINT, not corral), and its modes are restored after.
func TestRunTTYOnATerminal(t *testing.T) {
	t.Parallel()
	bin := corralBinary(t)
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	if err := pty.Setsize(master, &pty.Winsize{Rows: 33, Cols: 77}); err != nil {
		t.Fatal(err)
	}
	modes := func() *unix.Termios {
		tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tio
	}
	before := modes()
	if before.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) == 0 {
		t.Fatalf("a new terminal is already raw: lflag %#x", before.Lflag)
	}

	cmd := exec.Command(bin, "run", "--tty", "--timeout", "120", "--",
		`stty size; read -p "name? " x; echo "got $x"; while [ "$(stty size)" != "30 100" ]; do sleep 0.05; done; echo resized; sleep 100`)
	cmd.Stdin, cmd.Stdout = slave, slave
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "CORRAL_DATA_DIR="+filepath.Join(t.TempDir(), "data"))
	// corral leads a session whose terminal is the slave, as a login
	// shell's child would: its group is the terminal's foreground group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var mu sync.Mutex
	var screen strings.Builder
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	await := func(what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second) // a bound for a loaded machine
		for time.Now().Before(deadline) {
			mu.Lock()
			got := screen.String()
			mu.Unlock()
			if strings.Contains(got, what) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		cmd.Process.Kill()
		t.Fatalf("no %q on the terminal; it shows %q; corral's stderr %q", what, screen.String(), stderr.String())
	}

	await("name? ")
	mu.Lock()
	if !strings.Contains(screen.String(), "33 77") {
		t.Errorf("stty size did not report the caller's 33x77: %q", screen.String())
	}
	mu.Unlock()
	raw := modes()
	if raw.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG|unix.IEXTEN) != 0 || raw.Iflag&(unix.ICRNL|unix.IXON) != 0 || raw.Oflag&unix.OPOST != 0 {
		t.Errorf("the caller's terminal while the command runs: lflag %#x iflag %#x oflag %#x, want raw", raw.Lflag, raw.Iflag, raw.Oflag)
	}
	master.Write([]byte("bob\r"))
	await("got bob")
	if err := pty.Setsize(master, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	await("resized")
	master.Write([]byte{3}) // Ctrl-C
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "corral: killed by SIGINT") {
			t.Errorf("after Ctrl-C: %v, stderr %q; want the command killed by SIGINT (130)", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("corral did not end after Ctrl-C; stderr %q", stderr.String())
	}
	after := modes()
	if after.Iflag != before.Iflag || after.Oflag != before.Oflag || after.Cflag != before.Cflag || after.Lflag != before.Lflag || after.Cc != before.Cc {
		t.Errorf("the caller's terminal after corral: %+v, want it as before: %+v", after, before)
	}
}
