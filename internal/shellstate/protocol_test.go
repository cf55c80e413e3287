package shellstate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseExports(t *testing.T) {
	t.Parallel()
	in := "declare -x A=\"1\"\ndeclare -x C=$'line\\nbreak'\ndeclare -x H\ndeclare -rx R=\"ro\"\n" +
		"export P=\"posix \\\"q\\\"\"\ndeclare -x U=$'\\u00e9\\x41\\101\\cA\\E'\n"
	got, err := ParseExports(in)
	want := []string{"A=1", "C=line\nbreak", "R=ro", "P=posix \"q\"", "U=éAA\x01\x1b"}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("ParseExports = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"garbage", "declare -x A=\"open", "declare -x A=$'open", "declare -x 1A=\"x\""} {
		if _, err := ParseExports(bad); err == nil {
			t.Errorf("ParseExports(%q) accepted it", bad)
		}
	}
}

// report is what the trap writes for cwd and an `export -p` listing.
func report(cwd, listing string) string {
	return "\x00corral-state 1\x00" + cwd + "\n\x00" + listing + "\x00corral-end\x00"
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		data    string
		cwd     string
		env     []string
		missing bool // ErrMissing expected
		bad     bool // another error expected
	}{
		// One complete report.
		{data: report("/tmp", "declare -x A=\"1\"\n"), cwd: "/tmp", env: []string{"A=1"}},
		// Output before the report (the trap of a nested shell) and two reports: the last counts.
		{data: "noise" + report("/a", "declare -x A=\"1\"\n") + report("/b", "declare -x B=\"2\"\n"), cwd: "/b", env: []string{"B=2"}},
		// Nothing at all.
		{data: "", missing: true},
		// A report cut short.
		{data: strings.TrimSuffix(report("/tmp", ""), "end\x00"), missing: true},
		// The two markers overlapping on their shared NUL (found by FuzzParse: it panicked).
		{data: "\x00corral-state 1\x00corral-end\x00", missing: true},
		// Text after the report: it no longer ends the data.
		{data: report("/tmp", "") + "x", missing: true},
		// No separator between the directory and the listing.
		{data: "\x00corral-state 1\x00/tmp\x00corral-end\x00", missing: true},
		// A relative directory.
		{data: report("tmp", ""), bad: true},
		// A listing bash would never write.
		{data: report("/tmp", "rm -rf /\n"), bad: true},
	} {
		cwd, env, err := Parse([]byte(tc.data))
		switch {
		case tc.missing:
			if !errors.Is(err, ErrMissing) {
				t.Errorf("Parse(%q) = %v, want ErrMissing", tc.data, err)
			}
		case tc.bad:
			if err == nil || errors.Is(err, ErrMissing) {
				t.Errorf("Parse(%q) = %v, want an error other than ErrMissing", tc.data, err)
			}
		case err != nil || cwd != tc.cwd || !cmp.Equal(env, tc.env):
			t.Errorf("Parse(%q) = %q %q %v, want %q %q", tc.data, cwd, env, err, tc.cwd, tc.env)
		}
	}
}

// quoteDouble is the reference encoder of bash's `declare -x NAME="value"`:
// \ " $ and ` escaped, everything else as it is.
func quoteDouble(v string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		if strings.IndexByte("\\\"$`", v[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('"')
	return b.String()
}

// quoteANSIC is the reference encoder of bash's $'...' form: printable
// ASCII as it is (\ and ' escaped), every other byte as three octal digits.
func quoteANSIC(v string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// fuzzName makes a valid variable name of any string.
func fuzzName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 16; i++ {
		if isNameByte(s[i], b.Len() == 0) {
			b.WriteByte(s[i])
		}
	}
	return "V" + b.String()
}

// FuzzParse: Parse never panics, whatever the shell wrote, and what it
// accepts is an absolute directory and NAME=value entries with valid names.
func FuzzParse(f *testing.F) {
	f.Add([]byte(report("/tmp", "declare -x A=\"1\"\ndeclare -ax B=([0]=\"x\")\n")))
	f.Add([]byte(report("/", "declare -x U=$'\\u00e9\\x4\\777\\c")))
	f.Add([]byte(report("/", "export P=\"a\\")))
	f.Add([]byte(report("/", "declare -A M=([\"k y\"]=$'v' [k]=\"w\" )\n")))
	f.Add([]byte("\x00corral-state 1\x00\x00corral-end\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cwd, env, err := Parse(data)
		if err != nil {
			return
		}
		if !strings.HasPrefix(cwd, "/") {
			t.Fatalf("Parse(%q) accepted the directory %q", data, cwd)
		}
		for _, kv := range env {
			name, _, ok := strings.Cut(kv, "=")
			if !ok || !validName(name) {
				t.Fatalf("Parse(%q) returned the entry %q", data, kv)
			}
		}
	})
}

// FuzzExportsRoundTrip: a listing in either of bash's quotings, with an
// exported-but-unset variable and an exported array between the entries,
// decodes to exactly the variables it encodes.
func FuzzExportsRoundTrip(f *testing.F) {
	f.Add("A", "plain", "B", "line\nbreak \x1b[0m \xff $HOME `x` \\ \"'", true)
	f.Add("_x1", "", "Z", "é ✓ \\u00e9 $'", false)
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string, posix bool) {
		n1, n2 = fuzzName(n1), fuzzName(n2)+"2"
		prefix := "declare -x "
		if posix {
			prefix = "export "
		}
		listing := prefix + n1 + "=" + quoteDouble(v1) + "\n" +
			prefix + "UNSET_ONLY\n" +
			"declare -ax ARR=([0]=" + quoteANSIC(v2) + " [1]=" + quoteDouble(v1) + ")\n" +
			prefix + n2 + "=" + quoteANSIC(v2) + "\n"
		got, err := ParseExports(listing)
		want := []string{n1 + "=" + v1, n2 + "=" + v2}
		if err != nil || !cmp.Equal(got, want) {
			t.Fatalf("ParseExports(%q) = %q, %v; want %q", listing, got, err, want)
		}
		_, _, _ = Parse([]byte(report("/", listing)))
	})
}

// TestBashExportsRoundTrip holds the parser against bash itself: variables
// with every kind of value bash quotes, listed by bash's own `export -p`,
// come back as Exports says they do.
func TestBashExportsRoundTrip(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	env := []string{"Q_NL=a\nb", `Q_QUOTES='"` + "`", "Q_DOLLAR=$HOME ${X}", `Q_BS=a\b\\`,
		"Q_CTRL=\x01\x1b[0m\x7f", "Q_BYTES=\xff\xfe", "Q_EQ=a=b=c", "Q_EMPTY=", "Q_UNI=é ✓",
		"Q_TWICE=1", "Q_TWICE=2", "1BAD=x"}
	if !PlainEnv(env) {
		t.Fatalf("PlainEnv(%q) = false", env)
	}
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", "builtin export -p")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseExports(string(out))
	if err != nil {
		t.Fatalf("ParseExports(%q): %v", out, err)
	}
	got = slices.DeleteFunc(got, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "PWD" || k == "OLDPWD" || k == "SHLVL" || k == "_"
	})
	slices.Sort(got)
	if diff := cmp.Diff(Exports(env), got); diff != "" {
		t.Errorf("bash's export -p, Exports (-) against ParseExports (+):\n%s", diff)
	}
}

// TestScript checks the script's variants: the trace off first and back on
// last, the gate next when gated, the trap only when tracked, the user's
// BASH_ENV restored in every one.
func TestScript(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ tracked, gated bool }{{true, false}, {false, true}, {true, true}} {
		s := Script(tc.tracked, tc.gated)
		if !strings.HasPrefix(s, xtraceOff+"exec 4<&-\n") || !strings.HasSuffix(s, xtraceRestore) || !strings.Contains(s, "CORRAL_BASH_ENV") {
			t.Errorf("Script(%v, %v) = %q: descriptor 4 stays open or BASH_ENV is not restored", tc.tracked, tc.gated, s)
		}
		if got := strings.Contains(s, "trap "); got != tc.tracked {
			t.Errorf("Script(%v, %v) sets the trap: %v", tc.tracked, tc.gated, got)
		}
		if got := strings.Contains(s, "-u 5 "); got != tc.gated {
			t.Errorf("Script(%v, %v) reads the gate: %v", tc.tracked, tc.gated, got)
		}
	}
	if got := Env("x", true); !slices.Contains(got, "CORRAL_BASH_ENV=+x") {
		t.Errorf("Env(x) = %q", got)
	}
	if got := Env("", false); !slices.Contains(got, "CORRAL_BASH_ENV=-") {
		t.Errorf("Env() = %q", got)
	}
	if f := Files(os.Stdin, os.Stdout); len(f) != WitnessFD-2 || f[FD-3] != os.Stdin || f[WitnessFD-3] != os.Stdin || f[ScriptFD-3] != os.Stdout {
		t.Errorf("Files laid out %v", f)
	}
}
