package main

import (
	"fmt"
	"os"
)

// openOwnFile opens path for reading if it is a regular file. Windows has
// no mode bits to check; the file's ACL is the owner's business.
func openOwnFile(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return os.Open(path)
}
