//go:build !linux

package main

// markNonDumpable does nothing outside Linux, which has no such flag: there a
// command running as the server's user may be able to read the server's
// environment, so the token belongs in a file and commands under another
// user (--run-as).
func markNonDumpable() error { return nil }

// nonDumpableWorks is whether markNonDumpable protects anything here.
const nonDumpableWorks = false
