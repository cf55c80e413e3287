package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/corral-sh/corral/killtree"
)

// Limits are the resource limit flags of corral run, serve and mcp: for
// run the command's limits, for the servers every command's default and the
// most a request may ask for.
type Limits struct {
	memoryMax string
	cpus      float64
	pidsMax   int
}

// Register defines the flags in fs.
func (l *Limits) Register(fs *flag.FlagSet) {
	fs.StringVar(&l.memoryMax, "memory-max", "0", "memory limit of a command's whole tree, a `size` such as 512M or 2GiB (0: none); the tree is killed when it runs out")
	fs.Float64Var(&l.cpus, "cpus", 0, "CPU limit of a command's whole tree, in `CPUs` such as 1.5 (0: none)")
	fs.IntVar(&l.pidsMax, "pids-max", killtree.DefaultPidsMax, "most tasks (processes and threads) of a command's tree (0: none)")
}

// Apply checks the flags and sets them in c.
func (l Limits) Apply(c *killtree.Config) error {
	mem, err := ParseSize(l.memoryMax)
	if err != nil {
		return fmt.Errorf("--memory-max: want a size such as 512M or 2GiB, got %q", l.memoryMax)
	}
	switch {
	case math.IsNaN(l.cpus) || math.IsInf(l.cpus, 0) || l.cpus < 0:
		return fmt.Errorf("--cpus must be 0 (none) or a positive number, got %v", l.cpus)
	case l.pidsMax < 0:
		return fmt.Errorf("--pids-max must be 0 (none) or positive, got %d", l.pidsMax)
	}
	c.MemoryMax, c.CPUs, c.PidsMax = mem, l.cpus, l.pidsMax
	if l.pidsMax == 0 {
		c.PidsMax = -1 // killtree's 0 is its default
	}
	return nil
}

// ParseSize parses a byte count with an optional unit, powers of 1024: K,
// M, G or T, alone or with iB ("512M", "64MiB", "1.5G").
func ParseSize(v string) (int64, error) {
	t := strings.TrimSpace(v)
	num := strings.TrimRightFunc(t, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' })
	mult, ok := sizeUnits[strings.ToUpper(strings.TrimSpace(t[len(num):]))]
	if !ok {
		return 0, fmt.Errorf("unknown unit in %q (K, M, G or T, alone or with iB, as in 512M or 64MiB)", v)
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil {
		return 0, err
	}
	if n < 0 || math.IsNaN(n) || n*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("size %s out of range", v)
	}
	return int64(n * float64(mult)), nil
}

// sizeUnits are the units ParseSize takes, all powers of 1024. KB, MB and
// GB are refused: whether they mean 1000 or 1024 is anyone's guess.
var sizeUnits = map[string]int64{"": 1,
	"K": 1 << 10, "KIB": 1 << 10,
	"M": 1 << 20, "MIB": 1 << 20,
	"G": 1 << 30, "GIB": 1 << 30,
	"T": 1 << 40, "TIB": 1 << 40}
