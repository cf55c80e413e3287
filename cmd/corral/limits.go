package main

import (
	"flag"
	"fmt"
	"math"

	"github.com/corral-sh/corral/killtree"
)

// limitFlags are the resource limit flags of corral run, serve and mcp: for
// run the command's limits, for the servers every command's default and the
// most a request may ask for.
type limitFlags struct {
	memoryMax string
	cpus      float64
	pidsMax   int
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.memoryMax, "memory-max", "0", "memory limit of a command's whole tree, a `size` such as 512M or 2GiB (0: none); the tree is killed when it runs out")
	fs.Float64Var(&l.cpus, "cpus", 0, "CPU limit of a command's whole tree, in `CPUs` such as 1.5 (0: none)")
	fs.IntVar(&l.pidsMax, "pids-max", killtree.DefaultPidsMax, "most tasks (processes and threads) of a command's tree (0: none)")
}

// apply checks the flags and sets them in c.
func (l limitFlags) apply(c *killtree.Config) error {
	mem, err := parseSize(l.memoryMax)
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
