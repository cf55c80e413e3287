// Package sandboxd serves corral as Kubernetes agent-sandbox's sandboxd:
// the gRPC service process.v1.ProcessService (agent-sandbox v1.0.1's wire,
// proto/process/v1/process.proto) and the REST API of its
// spec/filesystem/v1/filesystem.yaml (/v1/files/{path}, /v1/health,
// /v1/metadata), so agent-sandbox's SDKs and anything that speaks to a
// sandboxd drive corral unchanged. docs/sandboxd.md is the user's guide.
//
// Every process is a corral command or background job: its own containment,
// the server's limits, tree kill, the journal. The mapping:
//
//   - Execute runs config.command as argv (no shell around it; a name
//     without a slash is looked up in PATH), stdin /dev/null, and returns
//     corral's bounded model views: stdout's head and stderr's tail, each at
//     most 96 KiB and 4,000 lines with the exact marker saying what was cut
//     (sandboxd buffers everything). The gRPC deadline is the command's
//     timeout: the whole tree is killed when it passes (within the server's
//     1 to 300 s; no deadline is the server's default timeout, 60 s).
//     exit_code is the program's, or -1 when it did not exit by itself (a
//     signal, the timeout), as Go's ExitCode says it in sandboxd; stderr's
//     view then ends with corral's note saying why.
//   - Start runs it as a background job with stdin an open pipe (WriteStdin)
//     and streams init{process_id}, then raw stdout and stderr bytes (at most
//     256 KiB a message; output that keeps coming is sent at most 1 ms
//     after it was written, gathered into fewer messages, and output after
//     a pause at once), then exit{exit_code}. Memory stays bounded: the
//     output is read by byte cursor from the job's tail rings (the capture
//     ceiling, 512 KiB a stream), never queued per client; a client that
//     reads more slowly than the command writes skips what the ring no
//     longer holds, and the stream says so where the gap is. The process
//     lives as long as its stream, as in sandboxd: a client that goes away,
//     or the stream's deadline, kills the whole tree (and the server's
//     longest job lifetime bounds a stream without a deadline).
//   - process_id is a number this service gives (from 1, never reused while
//     it serves), not a kernel pid. It names the process until its Start
//     stream ends; afterwards, and for a process another client started
//     (another token), WriteStdin, SendSignal and ResizeTTY answer
//     NOT_FOUND.
//   - WriteStdin writes the bytes to the job's stdin pipe, or closes it on
//     eof. SendSignal reaches the whole tree: SIGKILL kills it at once;
//     SIGTERM is corral's way down (SIGTERM to every member, then SIGKILL
//     after the server's grace), so nothing outlives it; SIGINT goes to
//     every member and kills nothing by itself. SIGTERM and SIGKILL return
//     once the tree is gone.
//   - Start with pty runs the command on a new terminal of that size (a
//     zero side takes corral's default, 120×40; more than 1,000 a side is
//     INVALID_ARGUMENT), as corral's terminals do (docs/terminals.md): the
//     shell leads the terminal's session, its output, stderr's included, is
//     the one stdout stream, and WriteStdin types into it raw ("\x03" is
//     Ctrl-C through the line discipline). A terminal has no end of input:
//     eof on it is FAILED_PRECONDITION, saying to write "\x04" (Ctrl-D).
//     ResizeTTY sets the size, and the kernel sends SIGWINCH to the
//     terminal's foreground process group; a process started without a
//     pty, or a size out of 1 to 1,000 a side, is INVALID_ARGUMENT, one
//     that has exited FAILED_PRECONDITION.
//   - Errors carry gRPC codes: INVALID_ARGUMENT, NOT_FOUND,
//     FAILED_PRECONDITION, PERMISSION_DENIED (a cwd out of the root),
//     RESOURCE_EXHAUSTED (too many jobs), UNAVAILABLE (shutting down),
//     UNAUTHENTICATED.
//
// Auth: with Config.Tokens, every RPC needs gRPC metadata
// "authorization: Bearer TOKEN" with one of them (compared in constant
// time), and each token is its own client; without, the caller must listen
// on loopback or a unix socket (cmd/corral refuses otherwise). The REST
// files API checks the same header; /v1/health never needs it.
//
// Files: every path of the REST API is resolved beneath Config.RootDir
// through an os.Root (Go's openat-based resolution: every component is
// opened relative to the descriptor of its parent, and a "..", an absolute
// symlink or any symlink that leads out of the root is refused, whatever
// renames happen meanwhile), so no path and no symlink reaches outside it.
// An escape answers 403 PERMISSION_DENIED, as sandboxd does.
package sandboxd
