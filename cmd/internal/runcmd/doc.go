// Package runcmd is `corral run`: its flags, its supervisor, the live
// streams and the summary, and its terminal mode (--tty). corral and
// corral-server both run it. corral gives it no terminal emulator, so that
// a corral run does not load one, and a --tty run moves to corral-server
// (Main.Elsewhere), whose Main has corral's (supervisor/vtemu).
package runcmd
