package killtree

import (
	"os/exec"
	"testing"
	"time"
)

func TestZZProf(t *testing.T) {
	var raw time.Duration
	for range 100 {
		t0 := time.Now()
		c := exec.Command("/bin/true")
		c.Start()
		raw += time.Since(t0)
		c.Wait()
	}
	t.Logf("raw start %v", raw/100)
	for _, tier := range []Tier{TierPgroup, TierCgroup2, TierCgroup1} {
		m, err := New(Config{Tier: tier})
		if err != nil {
			t.Fatal(err)
		}
		var dStart, dExit, dKill, dWait, dClose, dScan time.Duration
		const n = 100
		for range n {
			t0 := time.Now()
			cmd := exec.Command("/bin/true")
			tr, err := m.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			t1 := time.Now()
			<-tr.Exited()
			t2 := time.Now()
			tr.Kill()
			t3 := time.Now()
			cmd.Wait()
			t4 := time.Now()
			tr.Close()
			t5 := time.Now()
			scanProcs()
			t6 := time.Now()
			dStart += t1.Sub(t0)
			dExit += t2.Sub(t1)
			dKill += t3.Sub(t2)
			dWait += t4.Sub(t3)
			dClose += t5.Sub(t4)
			dScan += t6.Sub(t5)
		}
		t.Logf("%s: start %v exit %v kill %v wait %v close %v scan %v", tier, dStart/n, dExit/n, dKill/n, dWait/n, dClose/n, dScan/n)
		m.Close()
	}
}
