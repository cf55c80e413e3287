// Package cli holds what the two commands share: corral (run, and the
// front door of every other subcommand) and corral-server (serve, mcp,
// doctor), which corral executes for those (docs/startup.md). It is small
// on purpose: whatever it imports, corral run initialises.
package cli
