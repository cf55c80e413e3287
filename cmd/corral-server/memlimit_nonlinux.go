//go:build !linux

package main

// containerMemory reads no cgroup off Linux: 0, none.
func containerMemory() int64 { return 0 }
