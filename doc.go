// Package corral is the module root of corral, a process-supervision engine
// for shell execution: it runs a command inside a containment it can always
// kill completely, drains stdout and stderr without blocking the child, and
// returns a bounded, self-describing, valid UTF-8 result.
//
// The library lives in the subpackages: supervisor is the entry point an
// embedding harness uses; capture, ringtail, budget and spill shape output;
// killtree owns containment; api serves HTTP and MCP. This package holds
// only repository-wide tests.
//
// A file's suffix names its platforms the same way in every package:
// _linux, _windows, _darwin, _unix (every Unix), _other (Unix but Linux: the
// BSDs and macOS), _nonlinux (everything but Linux, Windows included);
// anything narrower says what it is (_bsd, _linux_generic, _noflock).
package corral
