package proctest

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// run runs helper name with args, stdin and extra environment, and returns its outputs and
// exit code.
func run(t *testing.T, stdin string, env []string, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	argv, helperEnv := Argv(name, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(cmd.Environ(), helperEnv), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %s: %v", name, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestPlainHelpers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stdin    string
		env, args      []string
		stdout, stderr string
		code           int
	}{
		// Numbered lines without padding.
		{name: "lines", args: []string{"3"}, stdout: "1\n2\n3\n"},
		// Padding to the width; a number longer than the width is not cut.
		{name: "lines", args: []string{"10", "2"}, stdout: "1.\n2.\n3.\n4.\n5.\n6.\n7.\n8.\n9.\n10\n"},
		// The exit code is passed through.
		{name: "exit", args: []string{"7"}, code: 7},
		// A set variable is printed.
		{name: "env", args: []string{"PT_X"}, env: []string{"PT_X=a b"}, stdout: "a b\n"},
		// An unset variable prints <unset>.
		{name: "env", args: []string{"PT_UNSET_FOR_SURE"}, stdout: "<unset>\n"},
		// stdin is echoed and counted.
		{name: "stdin", stdin: "hello\n", stdout: "hello\n", stderr: "read 6 bytes\n"},
		// A zero sleep exits 0 at once.
		{name: "sleep", args: []string{"0"}},
		// Unknown helpers exit 2 with a message.
		{name: "no-such-helper", stderr: "proctest: unknown helper \"no-such-helper\"\n", code: 2},
		// Bad arguments exit 2.
		{name: "lines", args: []string{"x"}, stderr: "proctest: usage: lines <n> [width]\n", code: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := run(t, tc.stdin, tc.env, tc.name, tc.args...)
			got := []any{stdout, stderr, code}
			want := []any{tc.stdout, tc.stderr, tc.code}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %q: (-want +got)\n%s", tc.name, tc.args, diff)
			}
		})
	}
}

func TestFlood(t *testing.T) {
	t.Parallel()
	const n = 200_001 // Three full 64 KiB chunks and a partial one.
	out, errs, code := run(t, "", nil, "flood", "200001", "stdout")
	if len(out) != n || errs != "" || code != 0 {
		t.Errorf("flood stdout: got %d bytes out, %d err, code %d; want %d, 0, 0", len(out), len(errs), code, n)
	}
	if strings.Count(out, "\n") != n/64 {
		t.Errorf("flood stdout: %d lines, want %d", strings.Count(out, "\n"), n/64)
	}
	out, errs, _ = run(t, "", nil, "flood", "1000", "stderr")
	if len(out) != 0 || len(errs) != 1000 {
		t.Errorf("flood stderr: got %d bytes out, %d err; want 0, 1000", len(out), len(errs))
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"abc", "abc"},             // plain word stays bare
		{"/a/b.test", "/a/b.test"}, // paths stay bare
		{"", "''"},                 // empty word must still be a word
		{"a b", "'a b'"},           // space
		{"it's", `'it'\''s'`},      // embedded quote
		{"$HOME", "'$HOME'"},       // no expansion
	}
	for _, tc := range tests {
		if got := shellQuote(tc.in); got != tc.want {
			t.Errorf("shellQuote(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
