// Package ringtail keeps the tail of a byte stream and counts all of it.
//
// A [Tail] is an [io.Writer] for a child process's output pipe, built on a
// github.com/smallnest/ringbuffer ring in overwrite mode. It retains the last
// [Limits.MaxBytes] bytes of the stream and hands out at most the last
// [Limits.MaxLines] lines of those. It promises:
//
//   - Write never fails and never writes short, so the pipe keeps draining.
//   - Memory is one ring of MaxBytes, allocated on the first non-empty Write;
//     a 10 GB stream costs what a 1 MB one does. [Tail.Compact] shrinks it to
//     what it holds once the stream has ended ([Tail.Footprint] says what it
//     takes).
//   - The line bound is exact: what [Tail.Bytes] hands out never holds more
//     than MaxLines lines (300,000 one-byte lines keep the last 200,000). It
//     is applied when the tail is read, so Write only copies into the ring
//     and counts newlines with [bytes.Count].
//   - The counters ([Counts]) describe the whole stream exactly, with the
//     same line semantics as package capture: a last line without a newline
//     counts as a line, and a line of which only a suffix is retained counts
//     as captured. EdgeLineBytes (the last line) is exact even for a line longer than the ring.
//   - [Tail.Since] lets a follower read the stream by absolute byte offset and
//     learn how much it missed because the ring moved on.
//   - The retained bytes are byte-exact: nothing is decoded, so a UTF-8
//     character split across Write calls is kept as written.
//   - One writer and any number of readers may use a Tail concurrently;
//     readers get copies.
package ringtail
