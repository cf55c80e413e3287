package envd

import "io/fs"

// owners is empty on Windows: a file has no Unix owner.
func owners(fs.FileInfo) (owner, group string) { return "", "" }
