// Package journal keeps the durable record of what corral returned: every
// Result, per session, in an embedded bbolt store at
// <dataDir>/journal/journal.db, and the batches that grouped them.
//
// The package knows Results as bytes (json.RawMessage); it never imports
// the supervisor. It promises:
//
//   - Layout: one top-level bucket per session, named by the session ID
//     (the spill-name rules: 1–128 characters of [A-Za-z0-9._-], neither
//     "." nor ".."; anything else is an error wrapping [ErrInvalidSession]).
//     Entries sit in the session's "e" bucket under their seq as an 8-byte
//     big-endian key; batches in its "b" bucket under their ID.
//   - Entries: {"id", "session", "seq", "command", "startedAt", "endedAt",
//     "result"}; seq counts each session from 1 with no gaps (trimming
//     removes the oldest, never one in the middle). An entry is written as
//     started ([Journal.Start]: no endedAt, a null result) and completed
//     once ([Journal.Finish]); after that its bytes never change, and
//     [Journal.Get] returns exactly them. IDs are "r-<token>-<seq>" and
//     "b-<token>-<n>", where token is 32 random bits per session bucket, so
//     an ID from a deleted session names no entry of its successor (unless
//     the tokens collide, one chance in 2^32).
//   - Durability: every write is committed and synced (fdatasync) before
//     the call returns. Writes of concurrent callers share one commit and
//     its syncs (group commit); a lone writer commits at once, without
//     waiting for company.
//   - Recovery: entries and batches started and never finished by an
//     earlier process are listed at Open and completed once, by
//     [Journal.Recover], with the bytes its caller makes for them (the
//     supervisor writes an aborted, interrupted Result); nothing else is
//     ever rewritten.
//   - Exclusion: one process per store. Open waits at most
//     Options.LockTimeout (default 1 s) for bbolt's file lock and then
//     fails with [ErrLocked], naming the file.
//   - Damage: Open reads the whole file before bbolt maps it (verify.go:
//     both meta pages, every reachable page's header, elements and key
//     order, the freelist, the journal's own layout) and refuses a damaged
//     file with a [*CorruptError] naming the file and saying how to move
//     it aside; the journal never starts empty over it. An empty file is
//     a new store.
//   - Storage faults: a panic inside bbolt, a fault on its memory mapping,
//     a commit that cannot write or sync (EIO, ENOSPC), or a stored value
//     that is not JSON takes the Journal offline: that call and every
//     later one fail with an error wrapping [ErrOffline], and nothing
//     touches bbolt again (fault.go; docs/journal.md).
//   - Retention: a session keeps its newest Options.MaxEntries entries
//     (default 10,000; older ones are deleted as new ones come);
//     [Journal.Sweep] deletes the sessions idle longer than
//     Options.Retention (default 7 days) and returns their IDs so the
//     caller removes their spills and state.
//
// A Journal is safe for concurrent use. Close waits for writes in flight.
package journal
