package supervisor

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestTTYResult: a terminal command's Result has its one stream on stdout
// (what it wrote to stderr too; stderr empty), TERM=xterm-256color and
// none of the anti-prompt environment (each name as corral's own
// environment has it, where a pipe command gets the suppression); a flood is
// cut by the tail policy, and its spill is written and named by the marker.
func TestTTYResult(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{DataDir: t.TempDir()})
	const show = `echo out; echo err >&2; env`
	res := run(t, s, Request{Command: show, TTY: &TTYSize{}})
	if !strings.HasPrefix(res.Stdout, "out\nerr\n") || res.Stderr != "" {
		t.Errorf("stdout %q, stderr %q: want out and err on stdout, stderr empty", res.Stdout, res.Stderr)
	}
	env := func(out string) map[string]string {
		m := map[string]string{}
		for line := range strings.SplitSeq(out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				m[k] = v
			}
		}
		return m
	}
	tty, pipe := env(res.Stdout), env(run(t, s, Request{Command: show}).Stdout)
	if tty["TERM"] != ttyTerm {
		t.Errorf("TERM=%q on a terminal, want %s", tty["TERM"], ttyTerm)
	}
	for _, kv := range promptSuppression {
		k, v, _ := strings.Cut(kv, "=")
		own, set := os.LookupEnv(k)
		if got, ok := tty[k]; ok != set || got != own {
			t.Errorf("%s on a terminal: %q (set %v), want corral's own %q (set %v)", k, got, ok, own, set)
		}
		if pipe[k] != v {
			t.Errorf("%s on a pipe: %q, want the suppression's %q", k, pipe[k], v)
		}
	}

	// seq's 688,895 terminal bytes (\r\n line ends) pass the 512 KiB
	// capture ceiling: the view keeps the last lines, the spill the bytes
	// after the first 164,607, as the marker says.
	res = run(t, s, Request{Command: `seq 1 100000`, TTY: &TTYSize{}, Session: "s1", Label: "lbl"})
	info := res.StdoutInfo
	if !info.Truncated || info.KeptLines != 4000 || info.TotalLines != 100000 || info.SpillPath == "" || res.Stderr != "" {
		t.Fatalf("stdout info %+v, stderr %q", info, res.Stderr)
	}
	marker := "[truncated: kept the last 4000 of 100000 lines; limit 4000 lines / 96KB. Output after byte 164607 of 688895 saved to " +
		info.SpillPath + " — Grep it, or Read it with offset/limit.]\n96001\n"
	if !strings.HasPrefix(res.Stdout, marker) || !strings.HasSuffix(res.Stdout, "\n99999\n100000\n") {
		t.Errorf("stdout starts %q, ends %q; want the tail policy's marker, then the last lines", res.Stdout[:min(len(res.Stdout), 300)], res.Stdout[max(0, len(res.Stdout)-40):])
	}
	spilled, err := os.ReadFile(info.SpillPath)
	if err != nil || len(spilled) != 524288 || !strings.HasSuffix(string(spilled), "99999\r\n100000\r\n") {
		t.Errorf("spill %s: %v, %d bytes, ends %q", info.SpillPath, err, len(spilled), spilled[max(0, len(spilled)-20):])
	}
}

// TestTTYNeedsEmulator: a Supervisor without a terminal emulator
// (Config.Emulator) refuses a command with a terminal, by Run and as a
// job, with an error that names what is missing, and starts nothing; a
// command without one runs.
func TestTTYNeedsEmulator(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entry, marker := proctest.Marker(t)
	k, v, _ := strings.Cut(entry, "=")
	defer proctest.NoSurvivors(t, marker, time.Second)
	req := Request{Command: "echo ran; sleep 100", TTY: &TTYSize{}, Env: map[string]string{k: v}}
	if _, err := s.Run(context.Background(), req); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "no terminal emulator (supervisor.Config.Emulator") {
		t.Errorf("Run with a terminal and no emulator: %v, want the invalid request that names Config.Emulator", err)
	}
	if _, err := s.Jobs().Start(JobRequest{Request: req}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a job with a terminal and no emulator: %v, want an invalid request", err)
	}
	if left := proctest.Survivors(marker); len(left) > 0 {
		t.Errorf("a refused terminal command started: %v", left)
	}
	res, err := s.Run(context.Background(), Request{Command: "echo ran"})
	if err != nil || res.Stdout != "ran\n" {
		t.Errorf("a command without a terminal: %v %q", err, res.Stdout)
	}
}
