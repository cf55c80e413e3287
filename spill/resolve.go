package spill

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Resolve maps a user-supplied path, absolute or relative to DataDir, to a
// cleaned absolute path with every symlink resolved, provided the file
// exists and the result lies at or below the data directory (itself with
// symlinks resolved, so the result may not start with DataDir literally).
// Otherwise the error wraps ErrNotFound: a missing file, an empty path, a
// ".." traversal, an absolute path elsewhere and a symlink leading out are
// all reported alike, so the endpoint reveals nothing about the outside.
// Resolve checks one instant; callers open the result promptly. It is safe
// for concurrent use.
func (s *Store) Resolve(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%w: empty path", ErrNotFound)
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.dataDir, p)
	}
	root, err := filepath.EvalSymlinks(s.dataDir)
	if err != nil {
		return "", fmt.Errorf("%w: %q: data directory: %v", ErrNotFound, path, err)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		return "", fmt.Errorf("%w: %q", ErrNotFound, path)
	}
	real, err = filepath.Abs(real)
	if err != nil || !within(root, real) {
		return "", fmt.Errorf("%w: %q", ErrNotFound, path)
	}
	return real, nil
}

// within reports whether path is root or lies below it; both are absolute,
// cleaned and free of symlinks.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil || filepath.IsAbs(rel) {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
