package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
)

// detectWithin bounds how long a test waits for a wait to be reported. The
// figure (p50, p95) is BenchmarkWaitingLatency's; this bound only keeps a
// machine under heavy load (Python starting in seconds) from failing the
// test, and still fails it when detection does not happen at all.
const detectWithin = 30 * time.Second

// awaitWaiting polls the job until it is waiting and returns the wait and
// when it was seen.
func awaitWaiting(t *testing.T, s *Supervisor, id string) (Waiting, time.Time) {
	t.Helper()
	deadline := time.Now().Add(detectWithin)
	for time.Now().Before(deadline) {
		info, err := s.Jobs().Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiting != nil {
			return *info.Waiting, time.Now()
		}
		if info.State == JobExited {
			st, _ := s.Jobs().Status(id)
			t.Fatalf("the job exited without waiting: %+v", st.Result)
		}
		time.Sleep(5 * time.Millisecond)
	}
	out, _ := s.Jobs().Output(context.Background(), id, Stdout, 0, 0)
	t.Fatalf("no wait reported within %v; output %q", detectWithin, out.Data)
	return Waiting{}, time.Time{}
}

// corpusFile makes a file for the programs that edit or page one.
func corpusFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "file.txt")
	if err := os.WriteFile(f, []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// need skips a row whose program is not installed.
func need(t *testing.T, progs ...string) {
	t.Helper()
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (.ci/run installs it: the Debian packages less, vim-tiny, git, bc, sqlite3, make, procps, python3)", p)
		}
	}
}

// TestWaitingCorpus: real programs that wait for input, each on a stdin pipe
// (an interactive job) or a terminal, are reported waiting with the kind and
// the prompt a person would name, found in the kernel (their read, poll,
// select or epoll wait on the job's input).
func TestWaitingCorpus(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{MaxJobs: 64})
	file := corpusFile(t)
	py := `python3 -c `
	// sh and pyst print the time ("T<seconds>") just before the read, from
	// which the row measures its detection.
	sh := func(cmd string) string { return `echo "T$EPOCHREALTIME"; ` + cmd }
	pyst := func(code string) string {
		return `python3 -c 'import time; print("T%f" % time.time(), flush=True)` + "\n" + code + `'`
	}
	for _, tc := range []struct {
		name   string
		cmd    string
		tty    bool
		kind   string
		prompt string // the prompt, spaces trimmed at both ends
		alt    bool   // the screen shows the alternate screen
		progs  []string
	}{
		// a shell read: no prompt on a pipe (bash prints read -p only to a terminal)
		{"read/pipe", sh(`read x; echo got $x`), false, WaitLine, "", false, nil},
		{"read/tty", sh(`read -p "name: " x; echo got $x`), true, WaitLine, "name:", false, nil},
		// echo off, canonical: a password
		{"read-s/tty", sh(`read -s -p "Password: " x`), true, WaitPassword, "Password:", false, nil},
		// on a pipe there is no echo to turn off, and no prompt
		{"read-s/pipe", sh(`read -s -p "Password: " x`), false, WaitLine, "", false, nil},
		{"input/pipe", pyst(`input("name? ")`), false, WaitLine, "name?", false, []string{"python3"}},
		// input() outside -i reads the terminal line by line (no readline)
		{"input/tty", pyst(`input("name? ")`), true, WaitLine, "name?", false, []string{"python3"}},
		// getpass reads /dev/tty, not its stdin: matched through its controlling terminal
		{"getpass/tty", pyst(`import getpass; getpass.getpass()`), true, WaitPassword, "Password:", false, []string{"python3"}},
		// without a controlling terminal getpass warns and reads stdin, its prompt on stderr
		{"getpass/pipe", pyst(`import getpass; getpass.getpass()`), false, WaitLine, "Password:", false, []string{"python3"}},
		// the stamp from PYTHONSTARTUP, run just before the first prompt
		// (a shell's stamp would count Python's start-up too)
		{"python-i/pipe", `PYTHONSTARTUP=<(echo 'import time; print("T%f" % time.time(), flush=True)') python3 -i`, false, WaitLine, ">>>", false, []string{"python3"}},
		{"python-i/tty", `python3 -i`, true, WaitKey, ">>>", false, []string{"python3"}},
		// the prompt goes to stderr
		{"rm-i/pipe", sh(`rm -i ` + file), false, WaitLine, fmt.Sprintf("rm: remove regular file '%s'?", file), false, nil},
		{"rm-i/tty", sh(`rm -i ` + file), true, WaitLine, fmt.Sprintf("rm: remove regular file '%s'?", file), false, nil},
		// a full-screen program's prompt is the cursor's row: less's status line
		{"less/tty", `less ` + file, true, WaitKey, file + " (END)", true, []string{"less"}},
		{"vi/tty", `vi ` + file, true, WaitKey, "", true, []string{"vi"}},
		// git's editor: a commit without -m opens vi on the message
		{"git-commit/tty", `cd "$(mktemp -d)" && git init -q && EDITOR=vi git -c user.name=t -c user.email=t@t commit -q --allow-empty`,
			true, WaitKey, "", true, []string{"git", "vi"}},
		{"bc/pipe", sh(`bc -q`), false, WaitLine, "", false, []string{"bc"}},
		// on a terminal bc reads through readline: a key at a time
		{"bc/tty", sh(`bc -q`), true, WaitKey, "", false, []string{"bc"}},
		{"sqlite3/tty", sh(`sqlite3`), true, WaitKey, "sqlite>", false, []string{"sqlite3"}},
		{"sqlite3/pipe", sh(`sqlite3`), false, WaitLine, "", false, []string{"sqlite3"}},
		// top redraws in place without the alternate screen; its cursor row is any row
		{"top/tty", `top -d 1`, true, WaitKey, anyPrompt, false, []string{"top"}},
		{"yn/pipe", sh(`printf 'Continue? [Y/n] '; read a`), false, WaitLine, "Continue? [Y/n]", false, nil},
		{"yn/tty", sh(`printf 'Continue? [Y/n] '; read a`), true, WaitLine, "Continue? [Y/n]", false, nil},
		{"cat/pipe", sh(`cat`), false, WaitLine, "", false, nil},
		{"cat/tty", sh(`cat`), true, WaitLine, "", false, nil},
		// the waiting calls beside read: select, poll and epoll with stdin in the set
		{"select/pipe", pyst(`import select,sys; select.select([sys.stdin],[],[])`), false, WaitLine, "", false, []string{"python3"}},
		{"poll/pipe", pyst(`import select; p=select.poll(); p.register(0, select.POLLIN); p.poll()`), false, WaitLine, "", false, []string{"python3"}},
		{"epoll/pipe", pyst(`import select; e=select.epoll(); e.register(0, select.EPOLLIN); e.poll()`), false, WaitLine, "", false, []string{"python3"}},
		// timed waits: a long one is a wait at once; short ones once the
		// program went back to waiting after the timeout (select's timeval,
		// poll's and epoll's milliseconds)
		{"select-long/tty", pyst(`import select,sys; select.select([sys.stdin],[],[],60)`), true, WaitLine, "", false, []string{"python3"}},
		{"select-loop/pipe", py + "'import select,sys\nwhile not select.select([sys.stdin],[],[],0.2)[0]: pass'", false, WaitLine, "", false, []string{"python3"}},
		{"poll-loop/tty", py + "'import select; p=select.poll(); p.register(0, select.POLLIN)\nwhile not p.poll(200): pass'", true, WaitLine, "", false, []string{"python3"}},
		{"epoll-loop/pipe", py + "'import select; e=select.epoll(); e.register(0, select.EPOLLIN)\nwhile not e.poll(0.2): pass'", false, WaitLine, "", false, []string{"python3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			need(t, tc.progs...)
			req := JobRequest{Request: Request{Command: tc.cmd}, Interactive: !tc.tty}
			if tc.tty {
				req.TTY = &TTYSize{Cols: 100, Rows: 30}
			}
			st := startJob(t, s, req)
			w, seen := awaitWaiting(t, s, st.ID)
			if w.Kind != tc.kind || tc.prompt != anyPrompt && strings.TrimSpace(w.Prompt) != tc.prompt {
				t.Errorf("waiting %+v, want kind %q and prompt %q", w, tc.kind, tc.prompt)
			}
			// Detection comes within a few scans of the read (quietScan,
			// the debounce), far below these bounds; see the benchmark.
			if lag := seen.Sub(w.Since); lag > 5*time.Second || w.Since.Before(st0(s, st.ID)) {
				t.Errorf("seen %v after its start %v", lag, w.Since)
			}
			if strings.Contains(tc.cmd, "T%f") || strings.Contains(tc.cmd, "T$EPOCHREALTIME") {
				out, _ := s.Jobs().Output(context.Background(), st.ID, Stdout, 0, 0)
				m := stampRE.FindStringSubmatch(out.Data)
				if m == nil {
					t.Fatalf("no time stamp in %q", out.Data)
				}
				sec, _ := strconv.ParseFloat(m[1], 64)
				if lag := seen.Sub(time.Unix(0, int64(sec*1e9))); lag > time.Second || lag < 0 {
					t.Errorf("seen %v after the read's time stamp, want at most 1 s", lag)
				}
			}
			if w.Pid <= 0 || len(w.Argv) == 0 {
				t.Errorf("waiting names no process: %+v", w)
			}
			if tc.tty {
				sc, err := s.Jobs().Screen(st.ID)
				if err != nil || sc.AltScreen != tc.alt {
					t.Errorf("screen altScreen %v (%v), want %v", sc.AltScreen, err, tc.alt)
				}
			}
		})
	}
}

// stampRE finds the time a corpus row printed just before its read.
var stampRE = regexp.MustCompile(`T(\d+\.\d+)`)

// anyPrompt, as a corpus row's prompt, checks none.
const anyPrompt = "\x00any"

// st0 is when the job started.
func st0(s *Supervisor, id string) time.Time {
	info, _ := s.Jobs().Get(id)
	return info.StartedAt
}

// negatives are programs that block without waiting for the job's input:
// sleeping, reading a pipe fed inside their tree, a socket, a FIFO, inotify.
func negatives(t *testing.T) []negative {
	dir := t.TempDir()
	mk := filepath.Join(dir, "Makefile")
	os.WriteFile(mk, []byte("all: a b\na:\n\tsleep 30\nb:\n\tsleep 30\n"), 0o644)
	log := filepath.Join(dir, "log")
	os.WriteFile(log, []byte("x\n"), 0o644)
	return []negative{
		{"sleep", `sleep 30`, "sleep"},
		{"pipe-in-tree", `yes | head -c 1G | cat >/dev/null`, "cat"},
		{"socket-server", `python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); s.accept()'`, "python3"},
		{"socket-read", `python3 -c 'import socket, os; a, b = socket.socketpair(); os.read(a.fileno(), 1)'`, "python3"},
		{"fifo", `f=` + dir + `/fifo-$$; mkfifo "$f"; cat <>"$f"`, "cat"},
		{"make-j2", `make -s -j2 -f ` + mk, "sleep"},
		{"tail-f", `tail -f ` + log, "tail"},
		// one short timed wait (an Escape key's "is another key coming"),
		// then no read: it went on by itself
		{"short-select", `python3 -c 'import select,sys,time; select.select([sys.stdin],[],[],0.8); time.sleep(30)'`, "python3"},
		{"short-poll", `python3 -c 'import select,time; p=select.poll(); p.register(0, select.POLLIN); p.poll(800); time.sleep(30)'`, "python3"},
	}
}

// negative is a program that blocks without waiting for the job's input;
// comm names the process whose presence in the tree starts the watch.
type negative struct{ name, cmd, comm string }

// TestWaitingNegatives: none of the negatives is ever reported waiting, on a
// stdin pipe or a terminal, over a few seconds of scans.
func TestWaitingNegatives(t *testing.T) {
	t.Parallel()
	need(t, "python3", "make")
	s := newSup(t, Config{MaxJobs: 64})
	for _, tc := range negatives(t) {
		for _, tty := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tty=%v", tc.name, tty), func(t *testing.T) {
				t.Parallel()
				if w := neverWaits(t, s, tc, tty, 3*time.Second); w != nil {
					t.Errorf("%q reported waiting: %+v", tc.cmd, *w)
				}
			})
		}
	}
}

// TestWaitingNegativesHundred: each negative, 100 runs (50 on a stdin
// pipe, 50 on a terminal), never waiting; it logs the runs and the false
// positives of each (the corpus accuracy figure, docs/performance.md).
//
//	CORRAL_HEAVY=1 go test -run TestWaitingNegativesHundred -v ./supervisor
func TestWaitingNegativesHundred(t *testing.T) {
	proctest.Heavy(t)
	need(t, "python3", "make")
	s := newSup(t, Config{MaxJobs: 64})
	for _, tc := range negatives(t) {
		t.Run(tc.name, func(t *testing.T) {
			const runs = 100
			falsePositives := 0
			for i := range runs {
				if w := neverWaits(t, s, tc, i%2 == 1, 300*time.Millisecond); w != nil {
					falsePositives++
					t.Errorf("run %d (tty %v): %q reported waiting: %+v", i, i%2 == 1, tc.cmd, *w)
				}
			}
			t.Logf("%s: %d runs, %d reported waiting", tc.name, runs, falsePositives)
		})
	}
}

// neverWaits runs a negative as a job and watches it for d after its
// process appeared in the tree; it returns the first wait reported (nil:
// none, as it should be).
func neverWaits(t *testing.T, s *Supervisor, neg negative, tty bool, d time.Duration) *Waiting {
	t.Helper()
	req := JobRequest{Request: Request{Command: neg.cmd}, Interactive: !tty}
	if tty {
		req.TTY = &TTYSize{}
	}
	st := startJob(t, s, req)
	defer s.Jobs().Kill(st.ID)
	awaitComm(t, s, st.ID, neg.comm)
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		info, err := s.Jobs().Get(st.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiting != nil {
			return info.Waiting
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// TestWaitingAfterItsOutput: a wait is not told while what the program
// printed before its read is still in the pipe or the terminal, undrained
// (a yield returning at it would lack the prompt): with the drain held back,
// the read is seen but no wait; once the drain reads, the wait comes with
// its prompt.
func TestWaitingAfterItsOutput(t *testing.T) {
	s := newSup(t, Config{})
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			const cmd = "sleep 0.2; printf 'held? '; read x"
			release := make(chan struct{})
			testHookBeforeRead = func(p *proc, i streamIndex) {
				if p.v.Command == cmd && i == stdoutStream {
					<-release
				}
			}
			defer func() { testHookBeforeRead = nil }()
			req := JobRequest{Request: Request{Command: cmd}, Interactive: !tty}
			if tty {
				req.TTY = &TTYSize{}
			}
			st := startJob(t, s, req)
			awaitComm(t, s, st.ID, "bash")
			time.Sleep(700 * time.Millisecond) // the sleep, the printf, the read, and many scans
			info, err := s.Jobs().Get(st.ID)
			close(release)
			if err != nil {
				t.Fatal(err)
			}
			if info.Waiting != nil {
				t.Fatalf("a wait told while its prompt was undrained: %+v", *info.Waiting)
			}
			if w, _ := awaitWaiting(t, s, st.ID); w.Prompt != "held?" {
				t.Errorf("wait %+v, want the prompt held?", w)
			}
		})
	}
}

// TestTTYCtrlC: \u0003 typed into the terminal is a real Ctrl-C: the line
// discipline sends SIGINT to the foreground group; a lone sleep dies of it
// (signal SIGINT), and a shell that traps it survives and goes on.
func TestTTYCtrlC(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	st := startJob(t, s, JobRequest{Request: Request{Command: `sleep 100`, TTY: &TTYSize{}}})
	awaitComm(t, s, st.ID, "sleep")
	if err := s.Jobs().Input(st.ID, []byte("\x03"), false); err != nil {
		t.Fatal(err)
	}
	res, err := s.Jobs().Wait(context.Background(), st.ID, 10*time.Second)
	if err != nil || res.Signal != "SIGINT" {
		t.Errorf("sleep 100 after Ctrl-C: %v, signal %q, want SIGINT", err, res.Signal)
	}

	st = startJob(t, s, JobRequest{Request: Request{Command: `trap 'echo trapped' INT; sleep 100; echo "rc=$?"; read -p "next? " x; echo "got $x"`,
		TTY: &TTYSize{}}})
	awaitComm(t, s, st.ID, "sleep")
	s.Jobs().Input(st.ID, []byte("\x03"), false)
	w, _ := awaitWaiting(t, s, st.ID)
	if w.Prompt != "next?" {
		t.Errorf("after Ctrl-C the shell waits with %+v, want the prompt next?", w)
	}
	s.Jobs().Input(st.ID, []byte("yes\r"), false)
	res, err = s.Jobs().Wait(context.Background(), st.ID, 10*time.Second)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 ||
		!strings.Contains(res.Stdout, "trapped") || !strings.Contains(res.Stdout, "rc=130") || !strings.Contains(res.Stdout, "got yes") {
		t.Errorf("the trapping shell: %v %q %v", err, res.Stdout, res.Signal)
	}
}

// awaitComm waits until a process named comm is in the job's tree.
func awaitComm(t *testing.T, s *Supervisor, id, comm string) {
	t.Helper()
	j, err := s.jobs.get(id)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(detectWithin)
	for time.Now().Before(deadline) {
		j.mu.Lock()
		tree := j.tree
		j.mu.Unlock()
		if tree == nil {
			t.Fatalf("the job ended before %s started", comm)
		}
		pids, _ := tree.Pids(context.Background())
		for _, p := range pids {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); err == nil && strings.TrimSpace(string(b)) == comm {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s in the tree within %v", comm, detectWithin)
}

// TestTTYTreeKilled: a terminal job's tree, with a setsid child and a nohup
// daemon, is killed whole on every tier, as a pipe job's is.
func TestTTYTreeKilled(t *testing.T) {
	t.Parallel()
	for _, tier := range tiers(t) {
		t.Run(string(tier), func(t *testing.T) {
			t.Parallel()
			s := newSup(t, Config{Containment: killtree.Config{Tier: tier}})
			entry, marker := proctest.Marker(t)
			k, v, _ := strings.Cut(entry, "=")
			st, err := s.Jobs().Start(JobRequest{Request: Request{
				Command: `setsid sleep 300 & nohup sleep 300 >/dev/null 2>&1 & echo up; sleep 300`,
				Env:     map[string]string{k: v}, TTY: &TTYSize{}}})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(detectWithin)
			// bash execs its last command: the setsid sleep, the nohup sleep and it
			for len(proctest.Survivors(marker)) < 3 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			res, err := s.Jobs().Kill(st.ID)
			if err != nil || res.Kill.Tier != string(tier) || res.Kill.Processes < 3 {
				t.Errorf("kill: %v, %+v", err, res.Kill)
			}
			proctest.NoSurvivors(t, marker, time.Second)
		})
	}
}

// TestTTYSize: stty size reports the requested size; a resize reaches a
// WINCH trap.
func TestTTYSize(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	res := run(t, s, Request{Command: `stty size`, TTY: &TTYSize{Cols: 91, Rows: 17}})
	if res.Stdout != "17 91\n" || res.Stderr != "" {
		t.Errorf("stty size: %q, stderr %q", res.Stdout, res.Stderr)
	}
	st := startJob(t, s, JobRequest{Request: Request{Command: `trap 'stty size' WINCH; while :; do read -t 0.05 x; done`,
		TTY: &TTYSize{Cols: 80, Rows: 24}}})
	awaitComm(t, s, st.ID, "bash")
	time.Sleep(100 * time.Millisecond) // the trap is set before the loop runs
	if err := s.Jobs().Resize(st.ID, TTYSize{Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	info, _ := s.Jobs().Get(st.ID)
	if info.TTY == nil || *info.TTY != (TTYSize{Cols: 132, Rows: 43}) {
		t.Errorf("job tty %+v after the resize", info.TTY)
	}
	out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, 0, 10*time.Second)
	if err != nil || !strings.Contains(out.Data, "43 132") {
		t.Errorf("after the resize: %q %v", out.Data, err)
	}
	if err := s.Jobs().Resize(st.ID, TTYSize{Cols: 0, Rows: 3}); err == nil {
		t.Error("a resize without cols was taken")
	}
}

// TestTTYVi: vi on a terminal: typing ihello<Esc> with a yield returns once
// vi waits again, after it drew hello: the exchange's own output and the
// screen at that moment show hello on the first line with the alternate
// screen (vi's Escape-key timeout, a short timed wait, is no wait); :q!
// ends it with exit 0.
func TestTTYVi(t *testing.T) {
	t.Parallel()
	need(t, "vi")
	s := newSup(t, Config{})
	st := startJob(t, s, JobRequest{Request: Request{Command: `vi ` + filepath.Join(t.TempDir(), "new.txt"),
		TTY: &TTYSize{Cols: 80, Rows: 24}}})
	if w, _ := awaitWaiting(t, s, st.ID); w.Kind != WaitKey {
		t.Errorf("vi waits with %+v, want kind key", w)
	}
	for i := range 3 {
		text := fmt.Sprintf("hello%d", i)
		keys := "i" + text + "\x1b"
		if i > 0 {
			keys = "ddi" + text + "\x1b"
		}
		out, err := s.Jobs().Exchange(context.Background(), st.ID, Stdout, []byte(keys), false, 20*time.Second)
		sc, _ := s.Jobs().Screen(st.ID)
		if err != nil || out.Waiting == nil || !strings.Contains(out.Data, text) {
			t.Errorf("exchange %d: %v, waiting %+v, data %q", i, err, out.Waiting, out.Data)
		}
		if out.Screen == nil || out.Screen.Lines[0] != text || !out.Screen.AltScreen {
			t.Errorf("exchange %d: its screen view %+v, want %s on the first line", i, out.Screen, text)
		}
		if sc.Lines[0] != text || !sc.AltScreen || sc.Cols != 80 || sc.Rows != 24 || strings.Contains(sc.Lines[sc.Rows-1], "INSERT") {
			t.Errorf("screen after i%s<Esc>, as the exchange returned: %+v", text, sc)
		}
	}
	s.Jobs().Input(st.ID, []byte(":q!\r"), false)
	res, err := s.Jobs().Wait(context.Background(), st.ID, 20*time.Second)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Errorf("vi after :q!: %v %+v", err, res)
	}
}

// TestTTYScreenViews: a full-screen program's reads (a stdout read, an
// exchange) carry the screen, by the rule of a Result's view: less (the
// alternate screen), top (cursor addressing without it); a line prompt's
// reads do not; an exited full-screen job's read carries the screen it left.
func TestTTYScreenViews(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{MaxJobs: 8})
	file := corpusFile(t)
	for _, tc := range []struct {
		name, cmd string
		progs     []string
		want      func(Screen) bool // nil: no screen view
	}{
		{"less", `less ` + file, []string{"less"}, func(sc Screen) bool {
			return sc.AltScreen && sc.Lines[0] == "one" && sc.Lines[2] == "three" && strings.Contains(sc.Lines[sc.Cursor.Row], "(END)")
		}},
		{"top", `top -d 1`, []string{"top"}, func(sc Screen) bool {
			return !sc.AltScreen && strings.HasPrefix(sc.Lines[0], "top - ") && slices.ContainsFunc(sc.Lines, func(l string) bool { return strings.Contains(l, "PID") })
		}},
		{"line-prompt", `printf '\033[1mbold\033[0m\n'; read -p "name? " x; echo "hi $x"`, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			need(t, tc.progs...)
			st := startJob(t, s, JobRequest{Request: Request{Command: tc.cmd, TTY: &TTYSize{Cols: 100, Rows: 30}}})
			awaitWaiting(t, s, st.ID)
			out, err := s.Jobs().Output(context.Background(), st.ID, Stdout, CursorNext, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if out.Screen != nil {
					t.Errorf("a line prompt's read has a screen view: %+v", out.Screen)
				}
				out, err = s.Jobs().Exchange(context.Background(), st.ID, Stdout, []byte("ann\r"), false, 20*time.Second)
				if err != nil || out.Screen != nil || !strings.Contains(out.Data, "hi ann") {
					t.Errorf("its exchange: %v %+v", err, out)
				}
				return
			}
			if out.Screen == nil || !tc.want(*out.Screen) {
				t.Fatalf("read: screen view %+v", out.Screen)
			}
			if !strings.Contains(out.Data, "\x1b[") {
				t.Errorf("read: data %q has lost the bytes that drew the screen", out.Data)
			}
			out, err = s.Jobs().Exchange(context.Background(), st.ID, Stdout, []byte("q"), false, 20*time.Second)
			if err != nil || out.State != JobExited || out.Screen == nil {
				t.Fatalf("exchange q: %v, state %s, screen %+v", err, out.State, out.Screen)
			}
			out, err = s.Jobs().Output(context.Background(), st.ID, Stdout, 0, 0)
			if err != nil || out.Screen == nil {
				t.Errorf("the exited job's read: %v, screen %+v", err, out.Screen)
			}
		})
	}
}

// TestYieldOnWaiting: a yield returns as soon as a terminal command waits,
// long before the yield, with running, jobId and waiting; stdin?yield
// (JobExchange) returns at the next wait.
func TestYieldOnWaiting(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	begin := time.Now()
	res := run(t, s, Request{Command: `read -p "first? " a; read -p "second? " b; echo "$a-$b"`,
		TTY: &TTYSize{}, Yield: 60 * time.Second, Timeout: 120 * time.Second})
	t.Cleanup(func() { s.Jobs().Kill(res.JobID) })
	if !res.Running || res.JobID == "" || res.Waiting == nil || res.Waiting.Prompt != "first?" ||
		time.Since(begin) > 30*time.Second {
		t.Fatalf("yield: %+v after %v", res, time.Since(begin))
	}
	out, err := s.Jobs().Exchange(context.Background(), res.JobID, Stdout, []byte("x\r"), false, 30*time.Second)
	if err != nil || out.Waiting == nil || out.Waiting.Prompt != "second?" {
		t.Fatalf("exchange: %v %+v", err, out)
	}
	out, err = s.Jobs().Exchange(context.Background(), res.JobID, Stdout, []byte("y\r"), false, 30*time.Second)
	if err != nil || out.State != JobExited || !strings.Contains(out.Data, "x-y") {
		t.Errorf("last exchange: %v %+v", err, out)
	}
}

// TestTimeoutSaysWaiting: a foreground terminal command without yield that
// waits until its timeout says so in its Result.
func TestTimeoutSaysWaiting(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	res := run(t, s, Request{Command: `read -p "Proceed? " x`, TTY: &TTYSize{}, Timeout: 3 * time.Second})
	if !res.TimedOut || res.Waiting == nil || res.Waiting.Prompt != "Proceed?" ||
		!strings.Contains(res.Stderr, "waiting for input") {
		t.Errorf("timed out: %+v", res)
	}
}

// TestCandidateConfirms: the rule that makes a sighting a wait. A call
// without timeout, or with a long one, is a wait at its second sighting; a
// short one (an Escape key's timeout) only once seen after its timeout
// passed, or after the reader held to the input for keyTimeout; a changed
// timeout is a new call.
func TestCandidateConfirms(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := reader{pid: 1, tid: 1, fd: 0, call: "select"}
	type look struct {
		at      time.Duration // after the first sighting
		timeout time.Duration
		want    bool
	}
	for _, tc := range []struct {
		name  string
		first time.Duration // the first sighting's timeout
		looks []look
	}{
		{"no timeout", noTimeout, []look{{ms(10), noTimeout, true}}},
		{"long timeout", 4 * time.Second, []look{{ms(10), 4 * time.Second, true}}},
		{"escape then none", ms(25), []look{{ms(10), ms(25), false}, {ms(30), ms(100), false}, {ms(80), ms(100), false},
			{ms(135), 4 * time.Second, false}, {ms(145), 4 * time.Second, true}}},
		{"short loop", ms(200), []look{{ms(10), ms(200), false}, {ms(190), ms(200), false}, {ms(210), ms(200), true}}},
		{"held", ms(300), []look{{ms(200), ms(250), false}, {ms(450), ms(200), false}, {ms(700), ms(300), false},
			{ms(1010), ms(299), true}}},
	} {
		c := &candidate{r: r, first: t0, call: t0, timeout: tc.first}
		for i, l := range tc.looks {
			_, ok := c.confirms(sighting{r: r, timeout: l.timeout}, t0.Add(l.at))
			if ok != l.want {
				t.Errorf("%s: look %d (%v, timeout %v) confirms %v, want %v", tc.name, i, l.at, l.timeout, ok, l.want)
			}
		}
	}
}
