package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/corral-sh/corral/killtree"
	"github.com/corral-sh/corral/supervisor"
)

const doctorUsage = `Usage: corral doctor [--run-as USER]

Prints every containment tier, whether it works here and why not, and which
one corral uses; then which resource limits (memory, cpus, pids) each tier
enforces here and how, or why not; then which of the guarantees in docs/boundary.md
hold for a command in this configuration: run by this user (root or not),
or, with --run-as, as USER.

Flags:
`

// doctor prints every containment tier, whether it works here and why not,
// and which one corral uses, then the guarantees that hold for commands.
func (m *Main) doctor(args []string) error {
	var runAs string
	fs := flag.NewFlagSet("corral doctor", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), doctorUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&runAs, "run-as", "", "report the guarantees for commands run as this `user` (as serve --run-as would)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "corral doctor: unexpected arguments %q\n", fs.Args())
		return errUsage
	}
	who, note, err := currentWho(runAs)
	if err != nil {
		return err
	}
	// Doctor detects afresh and rewrites the tier cache corral run reads.
	cfg := killtree.Config{Tier: killtree.Tier(m.Getenv("CORRAL_CONTAINMENT")), TierCache: tierCache(defaultDataDir(m.Getenv))}
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIER\tWORKS\tUSED\tDETAILS")
	var tier killtree.Tier
	tiers := killtree.Doctor(cfg)
	for _, st := range tiers {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", st.Tier, yesNo(st.Works), yesNo(st.Chosen), st.Reason)
		if st.Chosen {
			tier = st.Tier
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}

	// Which resource limits (--memory-max, --cpus, --pids-max, a
	// request's limits) each tier enforces here, and how or why not.
	fmt.Fprintln(m.Stdout)
	w = tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIER\tLIMIT\tENFORCED\tHOW")
	for _, st := range tiers {
		for _, l := range st.Limits {
			how := l.How
			if !st.Works && l.Enforced {
				how = "the tier does not work here"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", st.Tier, l.Limit, yesNo(st.Works && l.Enforced), how)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(m.Stdout)
	for _, line := range envelopeLines(killtree.ReadEnvelope(cfg)) {
		fmt.Fprintln(m.Stdout, line)
	}

	fmt.Fprintln(m.Stdout)
	switch {
	case note != "":
		fmt.Fprintln(m.Stdout, note)
	case who.runAs != "":
		fmt.Fprintf(m.Stdout, "Commands run as %s (--run-as); the server as root.\n", who.runAs)
	case who.root:
		fmt.Fprintln(m.Stdout, "Commands run as root, like the server (--run-as USER runs them as USER).")
	default:
		fmt.Fprintf(m.Stdout, "Commands run as uid %d, like the server.\n", os.Geteuid())
	}
	w = tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "A COMMAND\tHOLDS\tWHY")
	for _, g := range boundary(tier, who) {
		fmt.Fprintf(w, "%s\t%s\t%s\n", g.promise, yesNo(g.holds), g.why)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout)
	fmt.Fprintf(m.Stdout, "Server memory: corral serve and corral mcp set the Go soft memory limit to %s with the default --max-retained-bytes (docs/memory.md).\n",
		planMemoryLimit(supervisor.DefaultMaxRetainedBytes))
	if who.root || who.runAs != "" {
		fmt.Fprintln(m.Stdout, "No supervisor stops a root command that enters the host's PID namespace, loads a kernel module, or asks systemd or a container runtime to start a process; nor a --run-as user that can become root (sudo, the docker group, setuid helpers).")
	}
	return nil
}

// envelopeLines says what limits corral lives under here and what share
// of them a command gets (docs/limits.md, "The limits corral lives
// under").
func envelopeLines(e killtree.Envelope) []string {
	var out []string
	if e.Pids > 0 {
		out = append(out, fmt.Sprintf("Lives under: a pids limit of %d tasks (%s), %d in use now; a command gets at most %d on the cgroup tiers (%d kept for corral); on pgroup corral holds its threads ahead.",
			e.Pids, e.PidsSource, e.PidsUsed, e.CommandPids, e.PidsReserve))
	} else {
		out = append(out, "Lives under: no pids limit (no pids.max up the cgroup tree, and RLIMIT_NPROC unlimited or root).")
	}
	switch {
	case e.Memory > 0 && e.CommandMemory > 0:
		out = append(out, fmt.Sprintf("Lives under: a memory limit of %s (%s); a command gets at most %s on the cgroup tiers (%s kept for corral).",
			mib(e.Memory), e.MemorySource, mib(e.CommandMemory), mib(e.MemoryReserve)))
	case e.Memory > 0:
		out = append(out, fmt.Sprintf("Lives under: a memory limit of %s (%s), too small to keep %s for corral: commands get no memory limit from it.",
			mib(e.Memory), e.MemorySource, mib(e.MemoryReserve)))
	default:
		out = append(out, "Lives under: no memory limit up the cgroup tree.")
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
