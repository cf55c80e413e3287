package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/corral-sh/corral/killtree"
)

// doctor prints every containment tier, whether it works here and why not,
// and which one corral uses.
func (m *Main) doctor(args []string) error {
	if len(args) > 0 {
		fmt.Fprintln(m.Stderr, "usage: corral doctor")
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
