// Package spill writes the fuller copy of a command's output to a file when
// the model view was cut, and looks after those files afterwards.
//
// A spill file lives at
//
//	<dataDir>/scratch/<session>/tool-output/<label>-<unix-ms>-<seq>.log
//
// and the package promises:
//
//   - Names: session and label are 1–128 characters of [A-Za-z0-9._-] and
//     neither "." nor ".."; anything else is rejected with an error wrapping
//     [ErrInvalidName] before any file system call, so no name can reach a
//     path outside the data directory.
//   - Creation: directories are made on the first spill of a session only
//     (mode 0700), files are created with O_EXCL (mode 0600) and are never
//     overwritten; seq increases within the process across all Stores, and a
//     name that already exists is skipped for the next seq.
//   - Size: at most Options.MaxBytes (default 512 KiB) of data is written per
//     file.
//   - Failure: Write returns the error; callers drop the spill sentence from
//     the marker and never fail the command because of it. A file whose write
//     failed is removed.
//   - Lifecycle: [Store.RemoveSession] removes one session's directory and
//     [Store.Sweep] removes session directories whose newest file is older
//     than a retention (default 7 days). Both are safe while other goroutines
//     of the process write: a session written during a sweep survives it.
//     The exclusion is per process and per data directory spelling; two
//     processes sharing a data directory are not coordinated.
//   - Reading back: [Store.Resolve] maps a user-supplied path to a real path
//     inside the data directory (symlinks resolved) or fails with
//     [ErrNotFound]. It is a check at one instant: callers open the result
//     promptly and must not treat it as a sandbox against concurrent renames.
package spill
