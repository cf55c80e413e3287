package proctest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cgroupMounts lists where the cgroup hierarchies are mounted, from /proc/self/mountinfo
// (proc(5)): v1 maps each controller (and name=... for named hierarchies) to its mount point,
// v2 is the cgroup2 mount point or "". Only mounts of a hierarchy's root ("/") count, so a
// path under a mount point is a path in the hierarchy.
type cgroupMounts struct {
	v1 map[string]string
	v2 string
}

func readMounts() (cgroupMounts, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return cgroupMounts{}, err
	}
	defer f.Close()
	return parseMountinfo(bufio.NewScanner(f)), nil
}

// parseMountinfo reads lines "id parent maj:min root mountpoint opts [optional...] - fstype
// source superopts".
func parseMountinfo(sc *bufio.Scanner) cgroupMounts {
	m := cgroupMounts{v1: map[string]string{}}
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || f[3] != "/" {
			continue
		}
		mnt := unescapeMount(f[4])
		switch g[0] {
		case "cgroup2":
			if m.v2 == "" {
				m.v2 = mnt
			}
		case "cgroup":
			for opt := range strings.SplitSeq(g[2], ",") {
				if _, dup := m.v1[opt]; !dup && opt != "rw" && opt != "ro" {
					m.v1[opt] = mnt
				}
			}
		}
	}
	return m
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups parses a /proc/<pid>/cgroup or /proc/thread-self/cgroup file: v1 controller (or
// name=...) to path, and the v2 path under the key "".
func ownCgroups(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// cgroupTree lists dir and every cgroup below it, deepest first, so that removing them in
// order removes children before parents.
func cgroupTree(dir string) []string {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil // A cgroup removed during the walk is simply not listed.
	})
	slices.Reverse(dirs) // WalkDir lists parents before their children.
	return dirs
}

// readInts reads a file of one number per line, such as cgroup.procs or tasks.
func readInts(file string) []int {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// writeFile writes s to an existing cgroup control file.
func writeFile(file, s string) error {
	return os.WriteFile(file, []byte(s), 0)
}
