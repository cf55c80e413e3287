// Package confine keeps the file operations of corral's sandbox faces
// (api/sandboxd, api/envd) beneath one root directory. It stands on Go's
// os.Root: every component of a path is opened relative to the descriptor
// of its parent, and "..", an absolute symlink or any symlink that leads
// out of the root is refused, whatever is renamed meanwhile. What it adds:
// the faces' path rules (Local), telling an escape from other errors
// (Escapes), atomic writes, and giving what it makes to the user commands
// run as.
package confine
