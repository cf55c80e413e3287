package supervisor

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunAsSavedDirNoLongerEnterable runs a session as nobody: a command
// cds into a directory, which is then closed to nobody (mode 0700, owned
// by root). The next command starts in the session's start directory with
// a note naming the directory, never an error.
func TestRunAsSavedDirNoLongerEnterable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	t.Parallel()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start, closed := filepath.Join(base, "start"), filepath.Join(base, "closed")
	for _, d := range []string{start, closed} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := newSup(t, Config{User: "nobody"})
	if res := run(t, s, Request{Session: "ra", Dir: start, Command: "cd " + closed}); res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("cd: %+v", res)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	res := run(t, s, Request{Session: "ra", Command: "pwd"})
	if res.Stdout != start+"\n" || !strings.Contains(res.Stderr, closed+" can no longer be entered by user nobody") {
		t.Errorf("after the saved directory was closed: stdout %q stderr %q, want %s and a note", res.Stdout, res.Stderr, start)
	}
}
