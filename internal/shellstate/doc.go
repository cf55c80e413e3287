// Package shellstate is the protocol by which a bash shell reports the
// state a session carries from one command to the next: its working
// directory and its exported variables. It holds the start-up script that
// bash reads through BASH_ENV (Script), the descriptors the script uses
// (FD, ScriptFD, WitnessFD, GateFD), the decoder of what the script's EXIT
// trap writes (Parse, ParseExports), and the test that spares a command
// the report when its text cannot change the state (LeavesAlone, with
// PlainEnv and Exports for the environment it starts with).
//
// The package starts no process and opens no file: supervisor wires the
// descriptors and runs the shell. Every function is pure and safe for
// concurrent use; the parsers never panic, whatever bytes the shell wrote
// (FuzzParse).
//
// The report's promises:
//
//   - The command string reaches `bash -c` untouched: line numbers and
//     syntax errors read as they do without state tracking.
//   - The trap writes only while descriptor FD is still the file the
//     supervisor gave it (WitnessFD is a second copy) and is neither the
//     command's stdout nor its stderr: the state holds the whole
//     environment, which must never reach the command's output.
//   - A report that is missing or cut short decodes as ErrMissing, never
//     as a partial state.
package shellstate
