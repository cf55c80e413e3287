// Package api serves corral over the network: the HTTP exec server with
// NDJSON streaming, the MCP tools, authentication and metrics. It also owns
// the wire form of errors ({"error": {"code", "message"}}) that every
// interface, the CLI included, prints.
package api
