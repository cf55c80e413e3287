// Package budget turns retained command output and files into what reaches a
// model: bounded, valid UTF-8 views that say what they left out.
//
// Shape builds the model view of one shell stream from the bytes the capture
// layer kept plus the stream's counters: a head cut (marker appended), a tail
// cut (marker prepended) or a head+tail cut (marker between), under 96 KiB and
// 4,000 lines by default, with the exact truncation markers of the
// tool-result-limits specification (docs/tool-result-limits.md §3; code
// comments cite it as "spec §N"). Before cutting it cleans the view up
// for a model: ANSI escape sequences are stripped, carriage-return redraws
// collapsed, binary output replaced by one descriptive line and invalid UTF-8
// replaced with U+FFFD; the raw bytes stay untouched for the spill file.
// Binary detection sniffs the first 4 KiB only (spec §6 rule 3), so a NUL
// byte further on is replaced with U+FFFD and counted in Info.InvalidBytes,
// in raw mode too, and Read and Grep windows replace one the same way and
// count it in their notice: a NUL never reaches a model as it is.
//
// Read and Grep bound what a model reads back from a file (a spill file, in
// corral): Read returns a byte-faithful window of lines with a notice naming
// the next offset, Grep returns numbered matches up to a head limit. Both
// stream their input with a capped line reader, so a multi-megabyte file or
// a single giant line costs bounded memory.
//
// Everything here is pure and safe for concurrent use.
package budget
