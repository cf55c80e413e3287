// Package envd serves corral as an E2B envd: the Connect service
// process.Process (envd 0.6.13's wire, proto/process/process.proto) and
// GET /health, so the E2B SDKs in debug mode and control planes that expect
// an envd in every sandbox drive corral unchanged.
//
// Every process started here is a corral background job
// (supervisor.Jobs.Start): its own containment, the server's limits, tree kill.
// The mapping:
//
//   - Start runs cmd with args exactly, as envd does: the job's shell execs
//     the program, so the pid reported is the program's. envs apply on top of
//     the server's environment; cwd ("~" is the user's home) defaults to the
//     home of the user commands run as. stdin unset or true keeps stdin a
//     pipe (SendInput, StreamInput, CloseStdin); false gives /dev/null. The
//     tag, when it is a valid session name, is the job's session, else
//     "envd-" and a hash of it; no tag is session "default". A PTY is
//     refused (Unimplemented). The Connect-Timeout-Ms deadline is the
//     process's lifetime, as in envd; without one it is the supervisor's
//     longest job lifetime.
//   - The stream is start{pid}, then data (raw bytes, at most 256 KiB an
//     event) and keepalive (after Keepalive-Ping-Interval seconds, default
//     90, without an event), then end{exit_code, exited, status, error}.
//     A process killed by a signal ends with exit_code -1, exited false and
//     status "signal: killed" (or the signal's name), as Go's ProcessState
//     says it in envd.
//   - Memory stays bounded: the output is read by byte cursor from the job's
//     tail rings (the capture ceiling, 512 KiB a stream), never queued per
//     client. A client that reads more slowly than the command writes skips
//     what the ring no longer holds, and the stream says so where the gap
//     is, in that stream: "[corral: N bytes of stdout were skipped here ...]".
//   - A Start whose stream is cancelled before the start event is sent kills
//     the process; a client that goes away after it leaves the process
//     running, as envd does. Connect attaches to a running process (or one
//     that exited and is still retained) by pid or tag and replays what the
//     rings still hold before the live output.
//   - SendSignal SIGKILL kills the whole tree at once, SIGTERM sends SIGTERM
//     to every member and SIGKILL after the supervisor's grace; either call
//     returns once the tree is gone. descendants is accepted (the whole tree
//     is always signalled); other signals are Unimplemented.
//   - Users: envd's "Authorization: Basic base64(user:)" names the user
//     the process runs as (supervisor.Request.User): its IDs and groups,
//     HOME, USER and LOGNAME, and its home as the default cwd. Another user
//     than the one commands run as anyway needs corral to run as root, and
//     is never root when corral runs commands as a --run-as user; else, and
//     for a user that does not exist, InvalidArgument. No header means the
//     user commands run as.
//
// Errors carry Connect codes: InvalidArgument, NotFound, Unimplemented,
// ResourceExhausted (too many jobs), Unavailable (shutting down) and
// Unauthenticated. With Config.Token every request but GET /health needs
// the header X-Access-Token (envd's), compared in constant time. Every
// response carries X-Envd-Version (Version). Cross-origin browser requests
// and DNS-rebound Host names on a loopback address are refused.
package envd
