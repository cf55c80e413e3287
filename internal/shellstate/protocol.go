package shellstate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A tracked command's shell reports its final state (working directory and
// exported variables) on descriptor 3 from an EXIT trap. The trap is set by a
// start-up script that bash reads through BASH_ENV from descriptor 4, so the
// command string itself is passed to `bash -c` untouched: line numbers and
// syntax errors read exactly as they do without state tracking. The script
// closes descriptor 4 and restores the BASH_ENV the command would otherwise
// have seen (handed over in CORRAL_BASH_ENV, which it unsets), so nested
// shells read no corral script. The script is the same for every command.
//
// Descriptor 9 is a second copy of descriptor 3, the witness: the trap writes
// only while 3 and 9 are still the same file and 3 is neither the command's
// stdout nor its stderr. A command that closed or redirected either (`exec
// 3>&1` is a common idiom, and the state holds the whole environment, which
// must never reach the output or a file of the command's) saves no state.
// The trap uses `builtin` so that functions named printf, pwd or export
// cannot change it, ends in `|| :` so that `set -e` cannot change the exit
// code, and bash restores the exit status the shell had before the trap ran
// (bash's run_exit_trap, trap.c).
const (
	FD        = 3 // the child's descriptor the state is written to
	ScriptFD  = 4 // the child's descriptor BASH_ENV reads the script from
	WitnessFD = 9 // the child's second copy of FD

	// UserBashEnv hands the command's own BASH_ENV to the script: "+value",
	// or "-" when the command has none. It never reaches the command.
	UserBashEnv = "CORRAL_BASH_ENV"

	stateBegin = "\x00corral-state 1\x00"
	stateEnd   = "\x00corral-end\x00"

	stateTrap = `trap '` + trapXtraceOff + `[[ /dev/fd/3 -ef /dev/fd/9 && ! /dev/fd/3 -ef /dev/fd/1 && ! /dev/fd/3 -ef /dev/fd/2 ]] && ` +
		`{ builtin printf "\0corral-state 1\0"; builtin pwd -P || builtin printf "%s\n" "$PWD"; ` +
		`builtin printf "\0"; builtin export -p; builtin printf "\0corral-end\0"; } >&3 2>/dev/null || :' EXIT`

	// restoreBashEnv gives the command its own BASH_ENV back and sources it.
	restoreBashEnv = `if [[ $CORRAL_BASH_ENV == +* ]]; then BASH_ENV=${CORRAL_BASH_ENV#+}; unset CORRAL_BASH_ENV; ` +
		`[[ -n $BASH_ENV ]] && . "$BASH_ENV"; else unset CORRAL_BASH_ENV BASH_ENV; fi` + "\n"

	// xtraceOff and xtraceRestore keep the script out of a trace the
	// command's environment turns on (SHELLOPTS=xtrace, BASH_XTRACEFD):
	// the trace of the one command that turns it off goes to /dev/null
	// (bash traces a command after its redirections; an inherited
	// BASH_XTRACEFD can only be 1 or 2, or one of corral's own descriptors),
	// and the restore is traced by nothing, being the last command run.
	// The user's BASH_ENV runs untraced.
	xtraceOff     = "{ CORRAL_XTRACE=$-; builtin set +x; } >/dev/null 2>&1\n"
	xtraceRestore = "if [[ $CORRAL_XTRACE == *x* ]]; then builtin unset CORRAL_XTRACE; builtin set -x; else builtin unset CORRAL_XTRACE; fi\n"

	// trapXtraceOff keeps the EXIT trap out of a trace the command turned
	// on (set -x), whatever descriptor BASH_XTRACEFD names: the trace goes
	// to a new descriptor on /dev/null ({var}> assigns BASH_XTRACEFD, bash
	// 4.1), the shell being about to exit.
	trapXtraceOff = `{ builtin set +x; } >/dev/null 2>&1 {BASH_XTRACEFD}>/dev/null; `

	// GateFD is the child's descriptor of the start gate: the read end of
	// a pipe the supervisor writes one byte to once the command's journal
	// entry is committed.
	GateFD = 5

	// gateLine holds the shell at the gate, before anything of the
	// command's (its BASH_ENV included) runs. Without the byte (the
	// supervisor died, so the write end closed) the shell exits at once.
	gateLine = "builtin read -r -n 1 -u 5 CORRAL_GATE || builtin exit 125; builtin unset CORRAL_GATE; exec 5<&-\n"
)

// Script is the BASH_ENV script of a command, read from ScriptFD: the
// state trap (writing to FD) when tracked, the start gate (reading GateFD)
// when gated; one of the two at least. The user's BASH_ENV (handed over in
// UserBashEnv) is sourced after the gate and before the trap is set, so a
// trap it sets cannot replace corral's.
func Script(tracked, gated bool) string {
	s := xtraceOff + "exec 4<&-\n"
	if gated {
		s += gateLine
	}
	s += restoreBashEnv
	if tracked {
		s += stateTrap + "\n"
	}
	return s + xtraceRestore
}

// Env is what the environment of a command started with Script gains:
// BASH_ENV pointing at ScriptFD, and the command's own BASH_ENV (bashEnv,
// when hasBashEnv) for the script to restore.
func Env(bashEnv string, hasBashEnv bool) []string {
	user := "-"
	if hasBashEnv {
		user = "+" + bashEnv
	}
	return []string{"BASH_ENV=/dev/fd/4", UserBashEnv + "=" + user}
}

// ErrMissing means the shell reported no complete state: the command
// closed or redirected descriptor FD, replaced the EXIT trap, or exec'd
// another program.
var ErrMissing = errors.New("no complete state was reported")

// Parse decodes what the trap wrote to FD: the last complete report, which
// must end the data. It returns the working directory (absolute) and the
// exported variables as NAME=value entries, in the order bash listed them.
// Data without a complete report at its end is ErrMissing.
func Parse(data []byte) (cwd string, env []string, err error) {
	i := bytes.LastIndex(data, []byte(stateBegin))
	// The markers share their NUL bytes: "\0corral-state 1\0corral-end\0",
	// which a command can write to FD itself, holds both, overlapping.
	if i < 0 || !bytes.HasSuffix(data, []byte(stateEnd)) || i+len(stateBegin) > len(data)-len(stateEnd) {
		return "", nil, ErrMissing
	}
	body := data[i+len(stateBegin) : len(data)-len(stateEnd)]
	dir, decls, ok := bytes.Cut(body, []byte{0})
	if !ok {
		return "", nil, ErrMissing
	}
	cwd = strings.TrimSuffix(string(dir), "\n")
	if !strings.HasPrefix(cwd, "/") {
		return "", nil, fmt.Errorf("working directory %q is not absolute", cwd)
	}
	env, err = ParseExports(string(decls))
	return cwd, env, err
}

// ParseExports decodes bash's `export -p` listing: one declaration per
// variable, `declare -x NAME="value"` (`export NAME="value"` in POSIX mode),
// the value double-quoted with \ " $ ` escaped, or ANSI-C quoted ($'...')
// when it holds control or non-UTF-8 bytes. A declaration without a value
// (exported but unset) is skipped.
func ParseExports(s string) ([]string, error) {
	var env []string
	for len(s) > 0 {
		array := false
		switch {
		case s[0] == '\n':
			s = s[1:]
			continue
		case strings.HasPrefix(s, "declare -"):
			flags, rest, ok := strings.Cut(s[len("declare -"):], " ")
			if !ok {
				return nil, errors.New("export listing: declaration without a name")
			}
			s = rest
			array = strings.ContainsAny(flags, "aA")
		case strings.HasPrefix(s, "export "):
			s = s[len("export "):]
		default:
			return nil, fmt.Errorf("export listing: unexpected text %q", head(s))
		}
		n := 0
		for n < len(s) && isNameByte(s[n], n == 0) {
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("export listing: bad name at %q", head(s))
		}
		name := s[:n]
		s = s[n:]
		if s == "" || s[0] == '\n' {
			continue // exported, never set
		}
		if s[0] != '=' {
			return nil, fmt.Errorf("export listing: unexpected text after %s", name)
		}
		if array {
			// Exported arrays are listed but never reach a child's
			// environment (bash exports scalars only): skipped.
			rest, err := skipArray(s[1:])
			if err != nil {
				return nil, fmt.Errorf("export listing: %s: %w", name, err)
			}
			s = rest
			continue
		}
		val, rest, err := unquoteValue(s[1:])
		if err != nil {
			return nil, fmt.Errorf("export listing: %s: %w", name, err)
		}
		env = append(env, name+"="+val)
		s = rest
	}
	return env, nil
}

// skipArray returns what follows an array's listing at the start of s:
// `([0]="a" [1]=$'b\n')`, or for an associative array `([key]="v"
// ["k y"]="w" )`, each key bare or quoted as a value is.
func skipArray(s string) (string, error) {
	if !strings.HasPrefix(s, "(") {
		return "", fmt.Errorf("array listing %q", head(s))
	}
	s = s[1:]
	for {
		s = strings.TrimLeft(s, " ")
		switch {
		case strings.HasPrefix(s, ")"):
			return s[1:], nil
		case !strings.HasPrefix(s, "["):
			return "", fmt.Errorf("array listing: unexpected %q", head(s))
		}
		s = s[1:]
		var err error
		if strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "$'") {
			if _, s, err = unquoteValue(s); err != nil {
				return "", err
			}
		} else if i := strings.IndexByte(s, ']'); i >= 0 {
			s = s[i:]
		}
		if !strings.HasPrefix(s, "]=") {
			return "", fmt.Errorf("array listing: unexpected %q", head(s))
		}
		if _, s, err = unquoteValue(s[2:]); err != nil {
			return "", err
		}
	}
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

func head(s string) string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

// unquoteValue decodes one quoted value at the start of s and returns it
// with the rest of s.
func unquoteValue(s string) (string, string, error) {
	switch {
	case strings.HasPrefix(s, `"`):
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; c {
			case '"':
				return b.String(), s[i+1:], nil
			case '\\':
				if i+1 < len(s) && strings.IndexByte("\\\"$`\n", s[i+1]) >= 0 {
					i++
					c = s[i]
				}
				b.WriteByte(c)
			default:
				b.WriteByte(c)
			}
		}
		return "", "", errors.New("unterminated double quote")
	case strings.HasPrefix(s, "$'"):
		return unquoteANSIC(s[2:])
	}
	return "", "", fmt.Errorf("unquoted value %q", head(s))
}

// unquoteANSIC decodes the body of a $'...' word (bash's ansicstr,
// lib/sh/strtrans.c) up to its closing quote.
func unquoteANSIC(s string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\'' {
			return b.String(), s[i+1:], nil
		}
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(c)
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j < i+3 && '0' <= s[j] && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 16)
			b.WriteByte(byte(v))
			i = j - 1
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			j := i + 1
			for j < len(s) && j < i+1+width && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(c)
				continue
			}
			v, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if c == 'x' {
				b.WriteByte(byte(v))
			} else {
				b.WriteString(string(utf8.AppendRune(nil, rune(v))))
			}
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated $'...' quote")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Files lays out a command's ExtraFiles (index i becomes descriptor 3+i)
// for Script: state as FD and WitnessFD, script as ScriptFD. The caller
// owns both files and closes them after the start.
func Files(state, script *os.File) []*os.File {
	files := make([]*os.File, WitnessFD-2)
	files[FD-3], files[ScriptFD-3], files[WitnessFD-3] = state, script, state
	return files
}
