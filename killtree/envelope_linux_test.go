package killtree

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
)

func init() { proctest.Register("envelope", helperEnvelope) }

// envelopeSeen is what helperEnvelope prints.
type envelopeSeen struct {
	Env                  Envelope
	Threads              int
	Default, Low         Limits
	DefaultBound, LowBnd bool
	MemBound             bool
	InstancePids         string // the instance directory's pids.max while a tree lived
}

// helperEnvelope is a Manager in a process of its own: `envelope <tier>
// <parent>`. It prints, as JSON, its Envelope, its thread count, and the
// limits of a tree started with the defaults and of one that asked for 20
// tasks.
func helperEnvelope(args []string) int {
	m, err := New(Config{Tier: Tier(args[0]), CgroupParent: args[1]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer m.Close()
	seen := envelopeSeen{Env: m.Envelope(), Threads: threadCount()}
	for i, l := range []Limits{{}, {Pids: 20}} {
		cmd := exec.Command("true")
		tr, err := m.StartLimited(cmd, l)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if i == 0 {
			mnt := findMounts()
			root := mnt.v1["pids"]
			if root == "" {
				root = mnt.v2
			}
			seen.InstancePids = strings.TrimSpace(readFileOr(filepath.Join(mnt.place(root, filepath.Join(args[1], instance())), "pids.max")))
		}
		_, _ = tr.Kill()
		_ = cmd.Wait()
		if i == 0 {
			seen.Default, seen.DefaultBound, seen.MemBound = tr.Limits(), tr.Bounded(LimitPids), tr.Bounded(LimitMemory)
		} else {
			seen.Low, seen.LowBnd = tr.Limits(), tr.Bounded(LimitPids)
		}
		_ = tr.Close()
	}
	if err := json.NewEncoder(os.Stdout).Encode(seen); err != nil {
		return 1
	}
	return 0
}

// TestEnvelope runs a Manager in a process moved into an outer cgroup with
// pids.max 300 and a 512 MiB memory limit (the safety cgroup, standing for
// a container) on each working tier: it reads both as its envelope (the
// cgroup directory named), holds its reserve of threads, and a command
// started with the defaults gets the envelope's shares (on the cgroup
// tiers: pids below 300 less what is used and the reserve, memory 512 MiB
// less the reserve; the instance directory holding every command's leaf
// has that pids.max too), while one that asked for fewer tasks keeps its
// own.
func TestEnvelope(t *testing.T) {
	for _, tier := range workingTiers(t, "") {
		t.Run(string(tier), func(t *testing.T) {
			safety := proctest.Safe(t, 300)
			safety.LimitMemory(512 << 20)
			argv, henv := proctest.Argv("envelope", string(tier), "envtest")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), henv)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := safety.Start(cmd); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("envelope helper: %v\n%s", err, stderr.String())
			}
			var s envelopeSeen
			if err := json.Unmarshal([]byte(stdout.String()), &s); err != nil {
				t.Fatalf("%v: %q", err, stdout.String())
			}
			e := s.Env
			t.Logf("%+v", s)
			pidsDir := safety.Dir("pids")
			if pidsDir == "" {
				pidsDir = safety.Dir("")
			}
			if e.Pids != 300 || filepath.Clean(e.PidsSource) != pidsDir {
				t.Errorf("envelope pids %d from %q, want 300 from %s", e.Pids, e.PidsSource, pidsDir)
			}
			if e.PidsUsed < threadReserve || e.PidsReserve != DefaultPidsReserve || e.CommandPids != 300-e.PidsUsed-DefaultPidsReserve {
				t.Errorf("envelope used %d reserve %d command %d: want the %d held threads in used and command = 300 - used - %d",
					e.PidsUsed, e.PidsReserve, e.CommandPids, threadReserve, DefaultPidsReserve)
			}
			if s.Threads < threadReserve {
				t.Errorf("the Manager's process has %d threads, want the %d held", s.Threads, threadReserve)
			}
			if e.Memory != 512<<20 || e.CommandMemory != 512<<20-DefaultMemoryReserve {
				t.Errorf("envelope memory %d (command %d), want 512 MiB (less %d)", e.Memory, e.CommandMemory, DefaultMemoryReserve)
			}
			if tier == TierPgroup {
				// No pids limit to lower, and memory is per process.
				if s.DefaultBound || s.MemBound || s.Default.Pids != DefaultPidsMax {
					t.Errorf("pgroup: default limits %+v bound %v %v, want the defaults", s.Default, s.DefaultBound, s.MemBound)
				}
				return
			}
			if !s.DefaultBound || s.Default.Pids != e.CommandPids || !s.MemBound || s.Default.MemoryBytes != e.CommandMemory {
				t.Errorf("default limits %+v (bound pids %v memory %v), want the envelope's shares %d tasks, %d bytes",
					s.Default, s.DefaultBound, s.MemBound, e.CommandPids, e.CommandMemory)
			}
			if s.InstancePids != strconv.Itoa(e.CommandPids) {
				t.Errorf("instance directory pids.max %q, want the share of all commands together, %d", s.InstancePids, e.CommandPids)
			}
			if s.LowBnd || s.Low.Pids != 20 {
				t.Errorf("asked 20 tasks: limits %+v bound %v, want its own 20", s.Low, s.LowBnd)
			}
		})
	}
}
