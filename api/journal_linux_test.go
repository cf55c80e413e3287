package api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/supervisor"
)

// TestJournalDiskFull runs commands on a data directory that is a small
// tmpfs filled to the last byte: the Results still arrive, each saying it
// was not journaled; the journal goes offline with one loud log line,
// corral_journal_offline 1 and the failures counted in /metrics, and the
// history answers 503. Space returning does not bring it back (a storage
// fault holds until a restart); the restart finds the store whole (bbolt
// rolled the failed commits back) and completes the entry the fault caught.
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
	var logs lockedBuffer
	log := zerolog.New(&logs)
	var j *journal.Journal
	e := newEnv(t, func(_ *api.Config, c *supervisor.Config) {
		c.DataDir, c.Logger = dir, &log
		var err error
		if j, err = journal.Open(dir, journal.Options{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		c.Journal = j
	})
	before := e.exec(`{"session": "full", "command": "echo before"}`)
	if before.ID == "" {
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
		if r.ID != "" || !strings.Contains(r.Stderr, "this Result was not journaled: the journal is offline") {
			t.Fatalf("Result on a full disk: id %q, stderr %q", r.ID, r.Stderr)
		}
	}
	if n := strings.Count(logs.String(), "JOURNAL OFFLINE"); n != 1 {
		t.Errorf("%d JOURNAL OFFLINE lines in the log, want 1:\n%s", n, logs.String())
	}
	_, metrics := e.do(context.Background(), "GET", "/metrics", "")
	for name, least := range map[string]int{"corral_journal_write_errors_total": 1, "corral_journal_offline": 1} {
		m := regexp.MustCompile(`(?m)^` + name + ` (\d+)`).FindSubmatch(metrics)
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		if n, _ := strconv.Atoi(string(m[1])); n < least {
			t.Errorf("%s %d", name, n)
		}
	}
	if code, b := e.do(context.Background(), "GET", "/v1/sessions/full/results", ""); code != http.StatusServiceUnavailable ||
		!bytes.Contains(b, []byte(`"UNAVAILABLE"`)) {
		t.Errorf("history of an offline journal: %d %s", code, b)
	}

	// Space returns; the journal stays offline until a restart.
	os.Remove(filler)
	if r := e.exec(`{"session": "full", "command": "echo after"}`); r.ID != "" || !strings.Contains(r.Stderr, "not journaled") {
		t.Fatalf("after space returned: id %q, stderr %q", r.ID, r.Stderr)
	}
	j.Close()
	j2, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatalf("the restart after a full disk: %v", err)
	}
	defer j2.Close()
	if _, err := j2.Get("full", before.ID); err != nil {
		t.Errorf("the entry from before the fault: %v", err)
	}
	if n := j2.Unfinished(); n != 1 {
		t.Errorf("%d entries left started, want the one whose finish met the full disk", n)
	}
}
