package supervisor

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/killtree"
)

// TestNoteSurvivors checks the reporting path with a made-up kill report:
// a note with survivors names each (at most ten, then a count) and never
// says the tree was killed; without survivors the texts are as before.
func TestNoteSurvivors(t *testing.T) {
	t.Parallel()
	s := &Supervisor{maxTimeout: 300 * time.Second, maxLifetime: time.Hour}
	v := validated{timeout: 3 * time.Second}
	one := []killtree.Process{{Pid: 42, Comm: "sleep"}}
	var many []killtree.Process
	for i := range 12 {
		many = append(many, killtree.Process{Pid: 100 + i, Comm: "x"})
	}
	for _, c := range []struct {
		name  string
		end   ending
		kill  KillInfo
		alive []killtree.Process
		want  []string
		never []string
	}{
		// Timed out, one survivor: named, the tree not called killed.
		{"timeout", endTimedOut, KillInfo{Processes: 2, Survivors: 1}, one,
			[]string{"timed out after 3s", "killed 2 processes of its process tree, but 1 process is still alive: pid 42 (sleep)"},
			[]string{"killed its process tree"}},
		// Aborted, twelve survivors: ten named, two counted.
		{"abort", endAborted, KillInfo{Survivors: 12}, many,
			[]string{"aborted", "12 processes are still alive", "pid 109 (x) and 2 more"},
			[]string{"killed its process tree", "pid 110"}},
		// The shell exited; one of two lingering processes survived.
		{"exited", endExited, KillInfo{Processes: 1, Lingering: 2, Survivors: 1}, one,
			[]string{"left 2 processes running; corral could not kill 1 of them, still alive: pid 42 (sleep)"},
			[]string{"were killed"}},
		// The shell exited; its only lingering process survived.
		{"exited-one", endExited, KillInfo{Lingering: 1, Survivors: 1}, one,
			[]string{"left 1 process running; corral could not kill it, still alive: pid 42 (sleep)"},
			[]string{"was killed"}},
		// No survivor: the texts as before.
		{"timeout-clean", endTimedOut, KillInfo{Processes: 3}, nil,
			[]string{"killed its process tree (3 processes)"}, []string{"still alive"}},
		{"exited-clean", endExited, KillInfo{Processes: 1, Lingering: 1}, nil,
			[]string{"left 1 process running; it was killed"}, []string{"still alive"}},
	} {
		note := s.note(c.end, v, c.kill, c.alive)
		for _, w := range c.want {
			if !strings.Contains(note, w) {
				t.Errorf("%s: note %q lacks %q", c.name, note, w)
			}
		}
		for _, n := range c.never {
			if strings.Contains(note, n) {
				t.Errorf("%s: note %q has %q", c.name, note, n)
			}
		}
	}
}
