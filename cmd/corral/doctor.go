package main

import (
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/corral-sh/corral/killtree"
)

const doctorUsage = `Usage: corral doctor

Prints every containment tier, whether it works here (and why not), and
which one corral uses; CORRAL_CONTAINMENT forces one. It takes no flags.
`

// doctor prints every containment tier, whether it works here and why not,
// and which one corral uses.
func (m *Main) doctor(args []string) error {
	fs := flag.NewFlagSet("corral doctor", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), doctorUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "corral doctor: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return errUsage
	}
	cfg := killtree.Config{Tier: killtree.Tier(m.Getenv("CORRAL_CONTAINMENT"))}
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIER\tWORKS\tUSED\tDETAILS")
	for _, st := range killtree.Doctor(cfg) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", st.Tier, yesNo(st.Works), yesNo(st.Chosen), st.Reason)
	}
	return w.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
