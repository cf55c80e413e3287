package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corral-sh/corral/killtree"
)

// TestBoundary: which guarantees hold follows from who runs the command and
// on which tier; only --run-as under a root server on a cgroup tier holds
// them all, and a root command holds none.
func TestBoundary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tier killtree.Tier
		who  whoRuns
		want string // holds, one letter per guarantee in order: y or n
	}{
		{"root commands", killtree.TierCgroup2, whoRuns{root: true}, "nnnnn"},
		{"--run-as on cgroup2", killtree.TierCgroup2, whoRuns{root: true, runAs: "nobody"}, "yyyyy"},
		{"--run-as on cgroup1", killtree.TierCgroup1, whoRuns{root: true, runAs: "nobody"}, "yyyyy"},
		{"--run-as on pgroup: escapes are possible", killtree.TierPgroup, whoRuns{root: true, runAs: "nobody"}, "nyyyy"},
		{"same user on a delegated cgroup2", killtree.TierCgroup2, whoRuns{}, fmt.Sprintf("nn%snn", yn(nonDumpableWorks))},
		{"same user on pgroup", killtree.TierPgroup, whoRuns{}, fmt.Sprintf("nn%snn", yn(nonDumpableWorks))},
	}
	for _, tc := range tests {
		var got strings.Builder
		for _, g := range boundary(tc.tier, tc.who) {
			got.WriteString(yn(g.holds))
			if g.why == "" {
				t.Errorf("%s: %q has no reason", tc.name, g.promise)
			}
		}
		if got.String() != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got.String(), tc.want)
		}
	}
}

func yn(b bool) string { return yesNo(b)[:1] }
