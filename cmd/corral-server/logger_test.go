package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestConsoleLogHasNoColourOffTerminal: --log-format console writes plain
// text when stderr is not a terminal (a file, a pipe, a journal).
func TestConsoleLogHasNoColourOffTerminal(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	m := &Main{Stderr: &stderr}
	log, err := m.logger(serverFlags{logFormat: "console", logLevel: "info"})
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Str("session", "s").Int("exit", 0).Msg("command")
	out := stderr.String()
	if !strings.Contains(out, "command") || !strings.Contains(out, "session=s") {
		t.Fatalf("console line %q", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour codes off a terminal: %q", out)
	}
}
