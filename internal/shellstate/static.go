package shellstate

import (
	"slices"
	"strings"
)

// Most commands a session runs cannot change what the session carries: `ls`,
// `pytest -x`, `make test 2>&1 | tail` run programs, and no program can
// change its parent shell's working directory or exported variables. Such a
// command's shell would report exactly the state it started with, so corral
// need not ask it to (the start-up script, the EXIT trap and `export -p`
// cost the shell time: supervisor's BenchmarkSessionStateRatio): the
// supervisor saves that start state itself when the shell exits by itself,
// as it would have saved the report.
//
// LeavesAlone decides it from the command's text, and only says yes
// when no reading of the text by bash can change the state. It refuses:
//
//   - quotes, backslashes, `$`, backquotes and braces, which hide or build
//     words (`"cd"`, `c\d`, `$CMD`, `$(echo cd)`, `{cd,/tmp}`) or assign
//     (`${X:=1}`);
//   - `((`, arithmetic, which assigns (`((X++))`);
//   - where bash expects a command name: a builtin or keyword able to
//     change the working directory or a variable, or to run text as
//     commands (cd, export, read, eval, source, ., exec, command, for, …:
//     stateWords), a glob character (`c?` can expand to a file named cd)
//     or `=` (`X=1` assigns). As an argument (`grep -r x .`, `ls *.go`,
//     `go test -run=X`) the same words only name files or pass text. With
//     a redirection anywhere, every word counts as a command name (`>out
//     c?`: the target comes before the name);
//   - a NUL or any byte outside printable ASCII, tab and newline.
//
// The session's environment is checked apart (PlainEnv): exported functions
// and bash's own special variables are imported by bash in ways a list of
// variables does not copy.
func LeavesAlone(command string) bool {
	if strings.Contains(command, "((") {
		return false
	}
	for i := 0; i < len(command); i++ {
		c := command[i]
		switch {
		case c == '\t' || c == '\n':
		case c < 0x20 || c >= 0x7f:
			return false
		case strings.IndexByte("\"'\\$`{}", c) >= 0:
			return false
		}
	}
	// With a redirection, a word before the command name can be its
	// target (`>out c?`): every word then counts as a command name.
	redirects := strings.ContainsAny(command, "<>")
	commandPos := true // the next word is where bash looks for a command name
	afterKeyword := false
	for tok := range shellTokens(command) {
		if isOperator(tok) {
			commandPos, afterKeyword = true, false
			continue
		}
		if (commandPos || redirects) && (stateWords[tok] || strings.ContainsAny(tok, "*?[]=")) {
			return false
		}
		switch {
		case keywordsBeforeCommand[tok]:
			commandPos, afterKeyword = true, true
		case afterKeyword && strings.HasPrefix(tok, "-"):
			// `time -p cmd`: the command name still comes
		default:
			commandPos, afterKeyword = false, false
		}
	}
	return true
}

// shellTokens yields the words and operators of text split the way bash
// splits unquoted text: blanks separate, and | & ; < > ( ) and newline are
// operators of their own (runs of them, such as `&&` or `>>`, come as one).
func shellTokens(text string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		const ops = "|&;<>()\n"
		i := 0
		for i < len(text) {
			c := text[i]
			switch {
			case c == ' ' || c == '\t':
				i++
			case strings.IndexByte(ops, c) >= 0:
				j := i
				for j < len(text) && strings.IndexByte(ops, text[j]) >= 0 {
					j++
				}
				if !yield(text[i:j]) {
					return
				}
				i = j
			default:
				j := i
				for j < len(text) && text[j] != ' ' && text[j] != '\t' && strings.IndexByte(ops, text[j]) < 0 {
					j++
				}
				if !yield(text[i:j]) {
					return
				}
				i = j
			}
		}
	}
}

func isOperator(tok string) bool { return strings.IndexByte("|&;<>()\n", tok[0]) >= 0 }

// stateWords are the builtins and keywords that can change the shell's
// working directory or its variables, or run text as commands in it. A
// command that holds one anywhere, as any word, reports its state.
var stateWords = map[string]bool{
	"cd": true, "pushd": true, "popd": true,
	"export": true, "declare": true, "typeset": true, "readonly": true, "local": true, "unset": true,
	"set": true, "shopt": true, "read": true, "mapfile": true, "readarray": true, "printf": true,
	"let": true, "getopts": true, "wait": true,
	"source": true, ".": true, "eval": true, "exec": true, "fc": true, "trap": true,
	"builtin": true, "command": true, "enable": true, "alias": true, "unalias": true, "hash": true,
	"function": true, "for": true, "select": true, "coproc": true, "case": true,
}

// keywordsBeforeCommand are the words after which bash reads a command name.
var keywordsBeforeCommand = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "do": true, "while": true, "until": true,
	"!": true, "time": true,
}

// PlainEnv reports whether every variable of env is one bash imports as an
// ordinary exported variable and hands back unchanged in `export -p`: a
// valid name, no exported function (BASH_FUNC_…), none of bash's own
// variables (BASH…, SHELLOPTS, IFS, UID, …), which it ignores, resets or
// acts on at start; and no BASH_ENV, whose script could change anything.
func PlainEnv(env []string) bool {
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue // exec drops it
		}
		if strings.HasPrefix(name, "BASH") || bashSpecial[name] {
			return false // BASH_FUNC_name%% is not a valid name, and bash imports it as a function
		}
		// Any other invalid name: bash does not import it, and export -p
		// does not list it; Exports drops it too.
	}
	return true
}

// bashSpecial are the variables (besides BASH…) that bash, given them in
// its environment, lists differently in `export -p` or not at all (bash
// 5.2, checked one by one: `env -i NAME=v bash -c 'export -p'`), or that
// change how it reads the command (POSIXLY_CORRECT). PWD, OLDPWD, SHLVL and
// _ differ too; supervisor never saves them.
var bashSpecial = map[string]bool{
	"SHELLOPTS": true, "IFS": true, "PPID": true, "PS1": true, "PS2": true, "PS4": true,
	"POSIXLY_CORRECT": true, "OPTIND": true, "OPTERR": true, "LINENO": true, "RANDOM": true,
	"SRANDOM": true, "EPOCHSECONDS": true, "EPOCHREALTIME": true, "HISTCMD": true,
	"COMP_WORDBREAKS": true,
}

func validName(name string) bool {
	for i := range len(name) {
		if !isNameByte(name[i], i == 0) {
			return false
		}
	}
	return name != ""
}

// Exports is what `export -p` of a shell started with env lists, as Parse
// returns it, for a PlainEnv: the valid names, each once with its last
// value, sorted.
func Exports(env []string) []string {
	last := make(map[string]string, len(env))
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if ok && validName(name) {
			last[name] = val
		}
	}
	out := make([]string, 0, len(last))
	for name, val := range last {
		out = append(out, name+"="+val)
	}
	slices.Sort(out)
	return out
}
