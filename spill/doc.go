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
//   - The data directory: New creates it if missing and opens it; the Store
//     holds that descriptor until Close and reaches every file beneath it,
//     never by resolving the data directory's path again. A data directory
//     renamed, or replaced by a symlink (to / or anywhere), after New leaves
//     the Store on the original directory, wherever it now is: that is by
//     design, so a command cannot redirect the server's reads and writes.
//   - Creation: directories are made on the first spill of a session only
//     (mode 0700), files are created with O_EXCL (mode 0600) and are never
//     overwritten; seq increases within the process across all Stores, and a
//     name that already exists is skipped for the next seq. Creation,
//     removal and sweeping go through an os.Root on the held descriptor, so
//     a component swapped for a symlink leading out is never followed out.
//   - Size: at most Options.MaxBytes (default 512 KiB) of data is written per
//     file: the start of a head, the end of a tail, or for a head+tail
//     stream both parts (the tail at most half) around the omitted middle.
//   - Extent: beside each file, <name>.log.meta holds one JSON object
//     (Extent: streamBytes, headBytes, tailBytes, headLines, headEndsLine)
//     saying what the file holds of its stream; it is written with the file
//     (a spill whose sidecar cannot be written fails as a whole), ages with
//     it in Sweep, and reads back as unknown (the zero Extent, no claim)
//     when missing or malformed. A sidecar rather than a header keeps the
//     file byte-faithful; rather than an xattr, it works on every file
//     system (tmpfs had no user xattrs before Linux 6.6).
//   - Failure: Write returns the error; callers drop the spill sentence from
//     the marker and never fail the command because of it. A file whose write
//     failed is removed.
//   - Lifecycle: [Store.RemoveSession] removes one session's directory and
//     [Store.Sweep] removes session directories whose newest file is older
//     than a retention (default 7 days). Both are safe while other goroutines
//     of the process write: a session written during a sweep survives it.
//     The exclusion is per process and per data directory spelling; two
//     processes sharing a data directory are not coordinated.
//   - Reading back: [Store.Open] opens a path under <dataDir>/scratch beneath
//     the held descriptor: with openat2(2) and RESOLVE_BENEATH|
//     RESOLVE_NO_SYMLINKS on Linux 5.6+, else (ENOSYS, a seccomp filter's
//     EPERM, other Unix systems) one O_NOFOLLOW openat(2) per component. No
//     symlink is followed, not even one inside; the open never blocks
//     (O_NONBLOCK, so a planted FIFO cannot hold a thread); only a regular
//     file is returned (fstat on the descriptor). Everything else is an
//     error wrapping [ErrNotFound] that says why. On Windows an os.Root
//     does the same, except that it follows a symlink in a directory
//     component while it stays inside.
package spill
