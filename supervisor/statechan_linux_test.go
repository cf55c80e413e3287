package supervisor

import (
	"strings"
	"testing"
)

// TestSessionScriptSealed: the start-up script every tracked command reads
// is one memfd of the supervisor's; a command that finds it through
// /proc/<supervisor>/fd and tries to change it fails, and the next command
// (of another session) runs the script unchanged.
func TestSessionScriptSealed(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	run(t, s, Request{Session: "a", Command: "true"}) // the script exists from here on
	res := run(t, s, Request{Session: "a", Command: `n=0; for f in /proc/$PPID/fd/*; do ` +
		`[[ $(readlink "$f") == *corral-state-script* ]] || continue; n=$((n+1)); ` +
		`{ printf 'echo PWNED\n' >> "$f"; } 2>/dev/null && echo appended; ` +
		`{ printf 'echo PWNED\n' 1<>"$f"; } 2>/dev/null && echo overwrote; done; echo "found $n"`})
	// Other tests' supervisors run in this process too: at least this one's.
	if !strings.HasPrefix(res.Stdout, "found ") || res.Stdout == "found 0\n" {
		t.Errorf("the command saw %q, want the script found and not writable", res.Stdout)
	}
	res = run(t, s, Request{Session: "b", Command: "export B=1; echo ran"})
	if strings.Contains(res.Stdout, "PWNED") || res.Stdout != "ran\n" {
		t.Errorf("the next command printed %q", res.Stdout)
	}
}

// TestSessionPipeChannel runs the portable state channel (the one other
// systems use, and Linux where no memfd can be had): state carried, an
// oversized state refused with the note, a flood of descriptor 3 drained
// and refused.
func TestSessionPipeChannel(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	s.statePipe = true
	run(t, s, Request{Session: "p", Command: "cd / && export P=1"})
	if dir, vals := sessionView(t, s, "p", "P"); dir != "/" || vals[0] != "1" {
		t.Errorf("pipe channel carried cwd %q P %q", dir, vals[0])
	}
	res := run(t, s, Request{Session: "p", Command: "export HUGE=$(head -c 300000 /dev/zero | tr '\\0' x); export P=2"})
	if !strings.Contains(res.Stderr, "is over the 256 KiB limit and was not saved") {
		t.Errorf("stderr %q lacks the too-large note", res.Stderr)
	}
	res = run(t, s, Request{Session: "p", Command: "head -c 50000000 /dev/zero >&3; export P=3; echo flooded"})
	if res.Stdout != "flooded\n" {
		t.Errorf("flood: %+v", res)
	}
	if _, vals := sessionView(t, s, "p", "P"); vals[0] != "1" {
		t.Errorf("after the refused states P is %q, want 1", vals[0])
	}
}
