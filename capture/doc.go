// Package capture keeps the head of a byte stream and counts all of it.
//
// A [Head] is an [io.Writer] for a child process's output pipe. It retains the
// first [Limits.MaxBytes] bytes and the first [Limits.MaxLines] lines of the
// stream, whichever limit is reached first, and after that only counts. It
// promises:
//
//   - Write never fails and never writes short, so the pipe keeps draining.
//   - Memory grows lazily with what is retained and never exceeds MaxBytes:
//     a 10 GB stream costs what a 1 MB one does.
//   - The counters ([Counts]) describe the whole stream exactly: total bytes
//     and lines (a last line without a newline counts as a line), what was
//     captured and what was omitted, and the length of the first line even
//     when it runs past the ceiling.
//   - The retained bytes are byte-exact: nothing is decoded, so a UTF-8
//     character split across Write calls is kept as written. Cutting on
//     character boundaries is the business of package budget.
//   - One writer and any number of readers may use a Head concurrently;
//     readers get copies.
//
// Newlines are counted with [bytes.Count], so writing costs about as much as
// copying the retained part; past the ceiling a Write only counts.
package capture
