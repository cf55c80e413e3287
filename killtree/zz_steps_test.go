package killtree

import (
	"fmt"
	"os/exec"
	"sort"
	"testing"
	"time"
)

func TestZZSteps(t *testing.T) {
	_ = trueBinary()
	tiers := []Tier{TierPgroup, TierCgroup2, TierCgroup1}
	ms := map[Tier]*Manager{}
	for _, tr := range tiers {
		m, err := New(Config{Tier: tr})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ms[tr] = m
	}
	names := []string{"handoff", "fork", "reply", "start", "exited", "kill", "wait", "close", "total"}
	d := map[Tier]map[string][]time.Duration{}
	for _, tr := range tiers {
		d[tr] = map[string][]time.Duration{}
	}
	for i := 0; i < 600; i++ {
		for _, tr := range tiers {
			m := ms[tr]
			t0 := time.Now()
			last := t0
			mark := func(n string) { now := time.Now(); d[tr][n] = append(d[tr][n], now.Sub(last)); last = now }
			cmd := exec.Command("/usr/bin/bash", "-c", "true")
			tree, err := m.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			mark("start")
			<-tree.Exited()
			mark("exited")
			tree.Kill()
			mark("kill")
			cmd.Wait()
			mark("wait")
			tree.Close()
			mark("close")
			d[tr]["total"] = append(d[tr]["total"], time.Since(t0))
		}
	}
	for _, tr := range tiers {
		fmt.Printf("%s:", tr)
		for _, n := range names {
			x := d[tr][n]
			if len(x) == 0 {
				continue
			}
			sort.Slice(x, func(a, b int) bool { return x[a] < x[b] })
			var s time.Duration
			for _, v := range x {
				s += v
			}
			fmt.Printf("  %s %v/%v", n, x[len(x)/2].Round(time.Microsecond), (s / time.Duration(len(x))).Round(time.Microsecond))
		}
		fmt.Println()
	}
}
