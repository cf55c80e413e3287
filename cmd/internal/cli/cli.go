package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-sh/corral/supervisor"
)

// ErrUsage marks a command-line mistake; it exits 2.
var ErrUsage = errors.New("usage")

// ExitError carries an exit code out of a subcommand.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// Exit is the process exit code for a subcommand's err: 0 for nil, the
// code of an ExitError, 2 for ErrUsage; anything else is printed on stderr
// as "corral: " and text(err), and exits 1.
func Exit(err error, stderr io.Writer, text func(error) string) int {
	var ee ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, ErrUsage):
		return 2
	}
	fmt.Fprintln(stderr, "corral:", text(err))
	return 1
}

// Plain is an error message without the Go package prefixes ("supervisor:
// ", "journal: ") that error texts keep for logs.
func Plain(msg string) string {
	for {
		pkg, rest, ok := strings.Cut(msg, ": ")
		if !ok || !goPackages[pkg] {
			return msg
		}
		msg = rest
	}
}

// goPackages are the prefixes Plain drops: corral's packages.
var goPackages = map[string]bool{"api": true, "budget": true, "capture": true, "envd": true, "journal": true,
	"killtree": true, "ringtail": true, "spill": true, "supervisor": true}

// DataDir is $CORRAL_DATA_DIR, else $XDG_DATA_HOME/corral, else
// ~/.local/share/corral; "" when none of them is set.
func DataDir(getenv func(string) string) string {
	if d := getenv("CORRAL_DATA_DIR"); d != "" {
		return d
	}
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "corral")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "corral")
	}
	return ""
}

// TierCache is the tier cache file in dataDir (killtree.Config.TierCache),
// "" (none) without a data directory.
func TierCache(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, "tiers")
}

// Grace is the --grace flag of run, serve and mcp as the supervisor takes
// it: seconds between SIGTERM and SIGKILL on the way down, 0 for SIGKILL at
// once (supervisor.NoGrace), at most supervisor.CeilingTimeout; anything
// else is a *supervisor.RequestError naming the flag.
func Grace(seconds float64) (time.Duration, error) {
	d, err := supervisor.ParseSeconds("--grace", seconds, 0, supervisor.CeilingTimeout)
	if err != nil || d > 0 {
		return d, err
	}
	return supervisor.NoGrace, nil
}
