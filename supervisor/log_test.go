package supervisor

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// TestLogResultLine: a finished command logs one info line with its
// session, label, exit, duration, bytes, tier and kill counts, and neither
// its command, its environment nor its output.
func TestLogResultLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := zerolog.New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})).Level(zerolog.InfoLevel)
	s := newSup(t, Config{Logger: &logger})
	const secret = "env-secret-4b2e"
	run(t, s, Request{Command: "printf 'out-secret-9d1a'; exit 4", Session: "logs", Label: "build",
		Env: map[string]string{"SECRET": secret}})
	mu.Lock()
	defer mu.Unlock()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["message"] == "command" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d command lines in %s", len(lines), buf.String())
	}
	m := lines[0]
	for k, want := range map[string]any{"level": "info", "session": "logs", "label": "build",
		"exit": 4.0, "stdoutBytes": 15.0, "stderrBytes": 0.0, "killed": 0.0, "timedOut": false} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	for _, k := range []string{"durationMs", "tier", "lingering", "escapees", "survivors"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %s in %v", k, m)
		}
	}
	for _, leak := range []string{secret, "out-secret-9d1a", "printf"} {
		if strings.Contains(buf.String(), leak) {
			t.Errorf("the log holds %q", leak)
		}
	}
}

// TestLogIDIsJournalID: with a journal, a command's log line carries the
// journal entry's ID (r-…) that its Result carries, so the two join; runId
// is its CORRAL_RUN_ID.
func TestLogIDIsJournalID(t *testing.T) {
	t.Parallel()
	logger, buf, mu := captureLog()
	dir := t.TempDir()
	s := newSup(t, Config{Logger: &logger, DataDir: dir, Journal: openJournal(t, dir)})
	res := run(t, s, Request{Command: `printf %s "$CORRAL_RUN_ID"`, Session: "logs"})
	mu.Lock()
	defer mu.Unlock()
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "command" {
			if !strings.HasPrefix(res.ID, "r-") || m["id"] != res.ID || m["runId"] != res.Stdout {
				t.Errorf("log id %v runId %v, Result id %q, CORRAL_RUN_ID %q", m["id"], m["runId"], res.ID, res.Stdout)
			}
			return
		}
	}
	t.Fatalf("no command line in %s", buf.String())
}

// captureLog is an info logger writing into a buffer guarded by the mutex.
func captureLog() (zerolog.Logger, *bytes.Buffer, *sync.Mutex) {
	buf, mu := new(bytes.Buffer), new(sync.Mutex)
	logger := zerolog.New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})).Level(zerolog.InfoLevel)
	return logger, buf, mu
}
