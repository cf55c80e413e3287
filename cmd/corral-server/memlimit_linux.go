package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoot is where the cgroup file systems are mounted (the v2 one, or
// v1's hierarchies under it), as in every container and systemd host.
const cgroupRoot = "/sys/fs/cgroup"

// containerMemory is the least memory limit of the cgroup this process
// lives in and its ancestors: memory.max (v2) or
// memory.limit_in_bytes (v1); 0 when there is none, or none readable.
func containerMemory() int64 {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	defer f.Close()
	var least int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			least = minLimit(least, leastUp(filepath.Join(cgroupRoot, parts[2]), cgroupRoot, "memory.max"))
		case hasController(parts[1], "memory"):
			root := filepath.Join(cgroupRoot, "memory")
			least = minLimit(least, leastUp(filepath.Join(root, parts[2]), root, "memory.limit_in_bytes"))
		}
	}
	return least
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// leastUp reads file in dir and each ancestor up to root and returns the
// least limit; 0 for none. "max", and v1's page-rounded
// 9223372036854771712, mean none.
func leastUp(dir, root, file string) int64 {
	var least int64
	for {
		if b, err := os.ReadFile(filepath.Join(dir, file)); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<62 {
				least = minLimit(least, n)
			}
		}
		if dir == root || !strings.HasPrefix(dir, root) {
			return least
		}
		dir = filepath.Dir(dir)
	}
}

// minLimit is the lesser of two limits, 0 meaning none.
func minLimit(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
