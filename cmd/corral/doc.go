// Command corral runs shell commands under corral's supervision.
//
//	corral run [flags] -- COMMAND   run one command, stream it, summarise it
//	corral serve | mcp | doctor     executes corral-server, which holds them
//	corral version                  print the version
//
// corral run is one process per command, so this binary links only what it
// needs (supervisor, killtree and what they import); the servers and doctor
// live in cmd/corral-server, which corral finds next to itself or on PATH
// (docs/startup.md). main is a thin wrapper over Main.Run(ctx, args), which
// does flag parsing and wiring only; the work is in package supervisor.
package main
