// Command corral-server holds corral's servers and doctor: corral serve,
// corral mcp and corral doctor execute it with their arguments, so that
// corral run, one process per command, does not initialise the HTTP, MCP,
// envd and sandboxd faces and their libraries (docs/startup.md).
//
//	corral-server serve [flags]     the HTTP API, MCP at /mcp, envd, sandboxd
//	corral-server mcp [flags]       MCP over stdio
//	corral-server doctor            the containment tiers and the boundary
//
// main is a thin wrapper over Main.Run(ctx, args); the work is in packages
// api and supervisor.
package main
