//go:build unix && !linux

package spill

// openBeneath opens rel beneath dirfd without following symlinks: the
// component-by-component walk (openat2 is Linux only).
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	return walkBeneath(dirfd, rel, flags)
}
