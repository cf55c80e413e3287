// Package vtemu is the terminal emulator of corral's terminal commands and
// jobs: charmbracelet/x/vt, with the methods supervisor.Emulator asks for
// (docs/terminals.md). It is a package of its own, which supervisor does
// not import, so that a program that runs no terminal command (corral run
// without --tty) does not load the emulator and the Unicode and color
// tables it brings. Give it to a Supervisor as corral-server does:
//
//	supervisor.Config{Emulator: func(cols, rows int) supervisor.Emulator { return vtemu.New(cols, rows) }}
package vtemu
