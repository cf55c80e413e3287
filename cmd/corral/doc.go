// Command corral runs shell commands under corral's supervision.
//
//	corral run [flags] -- COMMAND   run one command, stream it, summarise it
//	corral doctor                   show the containment tiers on this machine
//	corral version                  print the version
//
// main is a thin wrapper over Main.Run(ctx, args), which does flag parsing
// and wiring only; the work is in package supervisor.
package main
