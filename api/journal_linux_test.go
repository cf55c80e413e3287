package api_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

// TestJournalDiskFull runs commands on a data directory that is a small
// tmpfs filled to the last byte: the Result still arrives, the failed
// journal write is logged and counted in /metrics, and once space returns
// the next command is journaled again.
func TestJournalDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	var logs syncBuffer
	log := zerolog.New(&logs)
	e := newEnv(t, func(_ *api.Config, c *supervisor.Config) { c.DataDir, c.Logger = dir, &log }, withJournal(t))
	if r := e.exec(`{"session": "full", "command": "echo before"}`); r.ID == "" {
		t.Fatal("no journal entry while there is space")
	}

	// Fill the file system.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for len(chunk) > 1 { // the last few bytes too
		chunk = chunk[:len(chunk)/2]
		for {
			if _, err := f.Write(chunk); err != nil {
				break
			}
		}
	}
	f.Close()

	// Big results: each needs new pages in the store.
	for range 3 {
		r := e.exec(`{"session": "full", "command": "head -c 60000 /dev/zero | tr '\\0' x"}`)
		if r.ExitCode == nil || *r.ExitCode != 0 || len(r.Stdout) != 60000 {
			t.Fatalf("Result on a full disk: exit %v, %d bytes", r.ExitCode, len(r.Stdout))
		}
	}
	if !bytes.Contains([]byte(logs.String()), []byte("journal write failed")) {
		t.Errorf("no journal error in the log:\n%s", logs.String())
	}
	_, metrics := e.do(context.Background(), "GET", "/metrics", "")
	m := regexp.MustCompile(`(?m)^corral_journal_write_errors_total (\d+)`).FindSubmatch(metrics)
	if m == nil {
		t.Fatalf("no corral_journal_write_errors_total in /metrics")
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 1 {
		t.Fatalf("corral_journal_write_errors_total %d", n)
	}

	// Space returns: the next command is journaled and readable.
	os.Remove(filler)
	r := e.exec(`{"session": "full", "command": "echo after"}`)
	if r.ID == "" {
		t.Fatalf("not journaled after space returned; log:\n%s", logs.String())
	}
	if code, b := e.do(context.Background(), "GET", "/v1/sessions/full/results/"+r.ID, ""); code != 200 || !bytes.Contains(b, []byte(`"stdout":"after\n"`)) {
		t.Fatalf("GET after space returned: %d %s", code, b)
	}
}
