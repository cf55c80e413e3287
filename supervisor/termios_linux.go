//go:build linux || aix || solaris || illumos

package supervisor

import "golang.org/x/sys/unix"

// ioctlGetTermios is the ioctl that reads a terminal's termios here.
const ioctlGetTermios = unix.TCGETS
