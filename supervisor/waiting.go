package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/killtree"
)

// Kinds of input a waiting job asks for (Waiting.Kind).
const (
	// WaitLine is a canonical (line-buffered) terminal read, and every read
	// of a stdin pipe.
	WaitLine = "line"
	// WaitPassword is a canonical terminal read with echo off.
	WaitPassword = "password"
	// WaitKey is a non-canonical terminal read: a single key, or a
	// full-screen program (the screen's altScreen says which).
	WaitKey = "key"
)

// Waiting says that a running job is blocked reading its input: a process of
// its tree is in a read (or poll, select, epoll wait) of the job's stdin
// pipe or terminal, as the kernel reports it (docs/terminals.md). It is set
// once the read held for a short debounce, and cleared when input is
// written, or when a scan finds no process reading any more.
type Waiting struct {
	// Since is when the read was first seen.
	Since time.Time `json:"since"`
	// Pid and Argv name the reading process.
	Pid  int      `json:"pid"`
	Argv []string `json:"argv"`
	// Kind is WaitLine, WaitPassword or WaitKey.
	Kind string `json:"kind"`
	// Prompt is the last unterminated line of output before the read,
	// cleaned of escape sequences, at most MaxPromptChars characters (its
	// end); "" when the output ended with a newline.
	Prompt string `json:"prompt"`
}

// Describe says in words what the command waits for (notes, status lines).
func (w *Waiting) Describe() string {
	what := map[string]string{WaitLine: "a line of input", WaitPassword: "a password (echo is off)",
		WaitKey: "a key (the terminal is in raw mode)"}[w.Kind]
	prog := "a process"
	if len(w.Argv) > 0 {
		prog = fmt.Sprintf("%s (pid %d)", w.Argv[0], w.Pid)
	}
	s := fmt.Sprintf("waiting for input: %s reads %s", prog, what)
	if w.Prompt != "" {
		s += fmt.Sprintf(" after the prompt %q", w.Prompt)
	}
	return s
}

// MaxPromptChars bounds Waiting.Prompt.
const MaxPromptChars = 200

// Scan timing of the waiting watch.
const (
	// quietScan is how long a job's output must be quiet before its tree
	// is scanned, and the time between the two sightings that make a read
	// a wait (the debounce).
	quietScan = 10 * time.Millisecond
	// maxScanInterval is the longest a job that neither prints nor takes
	// input goes unscanned: the backoff doubles from quietScan up to it.
	// It bounds how late a read that follows a long silence is found, and
	// how long a wait that ended without output or input (a read -t that
	// timed out) is still reported; it is what 20 idle jobs cost
	// (BenchmarkWaitingIdle: a look at /proc/PID/syscall is not cheap).
	maxScanInterval = time.Second
)

// inputTarget identifies the job's input.
type inputTarget struct {
	pipeLink string // "pipe:[INODE]" of the stdin pipe; "" for a PTY job
	ttyPath  string // the PTY slave's path ("/dev/pts/3"); "" for a pipe job
	ttyDev   uint64 // its device number, to match /dev/tty through tty_nr
}

// reader is a thread found blocked reading the job's input.
type reader struct {
	pid, tid int
	fd       int
	call     string // the system call's family: "read", "poll", "select" or "epoll"
}

// sighting is one look at a reader: the call it is blocked in has timeout
// (noTimeout: none).
type sighting struct {
	r       reader
	timeout time.Duration
}

// noTimeout is the timeout of a call that waits until input comes.
const noTimeout time.Duration = -1

// keyTimeout is the longest timeout of a short wait: a program that waits
// with a timeout up to it may be asking "is another key coming" (vim's
// ttimeoutlen of 100 ms after an Escape, readline's keyseq-timeout of
// 500 ms, ncurses' ESCDELAY of 1 s), and goes on by itself when it passes,
// so it is not yet the end of a turn. Such a wait is a wait only once the
// program went back to waiting after its timeout passed, or held to the
// input for keyTimeout (docs/terminals.md).
const keyTimeout = time.Second

// short says whether a call with timeout d is a short wait (keyTimeout).
func short(d time.Duration) bool { return d != noTimeout && d <= keyTimeout }

// candidate is a reader seen, not yet a wait.
type candidate struct {
	r       reader
	inputs  uint64        // the input writes counted when it was first seen
	first   time.Time     // when r was first seen
	call    time.Time     // when its current call (timeout) was first seen
	timeout time.Duration // that call's timeout
}

// confirms says whether sighting g at now, of the candidate's reader with no
// input since, makes it a wait, and since when: a call without timeout or
// with a long one seen a second time (the debounce); a short one seen again
// once its timeout passed (it is a later call: the program went back to
// waiting), or after the reader held to the input for keyTimeout. A call
// whose timeout changed is a new call: it starts over, but for the hold.
func (c *candidate) confirms(g sighting, now time.Time) (time.Time, bool) {
	if g.timeout != c.timeout {
		c.call, c.timeout = now, g.timeout
		if short(g.timeout) && now.Sub(c.first) >= keyTimeout {
			return c.first, true
		}
		return time.Time{}, false
	}
	switch {
	case !short(g.timeout):
		return c.call, true
	case now.Sub(c.call) >= g.timeout:
		return c.call, true
	case now.Sub(c.first) >= keyTimeout:
		return c.first, true
	}
	return time.Time{}, false
}

// inputWatch finds out when a job's tree is blocked reading the job's
// input, and publishes it on the job. One goroutine (run) per watched job;
// the job's supervising goroutine owns it (close).
type inputWatch struct {
	tree   *killtree.Tree
	tgt    inputTarget
	stdin  *os.File      // a pipe job's stdin (our end), for its unread bytes; nil for a PTY
	outs   []*os.File    // copies of the output read ends, for bytes printed but not yet drained; closed by close
	kind   func() string // the kind of a terminal read; nil: WaitLine
	prompt func() string // the prompt to report
	set    func(*Waiting)

	kick    chan struct{} // buffered 1: output or input came while the watch slept long
	stop    chan struct{}
	done    chan struct{}
	lastOut atomic.Int64 // UnixNano of the last output
	sleepy  atomic.Bool  // the watch sleeps longer than quietScan: output must kick it

	mu      sync.Mutex
	inputs  uint64 // guarded by mu; counts input writes
	waiting bool   // guarded by mu
	cur     reader // guarded by mu; the reader of the current wait
}

func newInputWatch() *inputWatch {
	return &inputWatch{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// output records that the job printed. It never blocks: called from the
// drain for every chunk.
func (w *inputWatch) output() {
	w.lastOut.Store(time.Now().UnixNano())
	if w.sleepy.Load() && w.sleepy.CompareAndSwap(true, false) {
		w.poke()
	}
}

func (w *inputWatch) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// beforeInput is called before input is written: a read seen before it is
// no evidence of a wait after it.
func (w *inputWatch) beforeInput() {
	w.mu.Lock()
	w.inputs++
	w.mu.Unlock()
}

// afterInput ends the current wait (the input was written: the reader has
// it) and makes the watch look again soon.
func (w *inputWatch) afterInput() {
	w.mu.Lock()
	if w.waiting {
		w.waiting = false
		w.set(nil)
	}
	w.mu.Unlock()
	w.poke()
}

// outputPending says whether the job printed bytes that the drain has not
// read yet.
func (w *inputWatch) outputPending() bool {
	for _, f := range w.outs {
		if pipeUnread(f) > 0 {
			return true
		}
	}
	return false
}

// close stops the watch and waits for it; the job's wait, if any, ends.
func (w *inputWatch) close() {
	close(w.stop)
	<-w.done
	for _, f := range w.outs {
		f.Close()
	}
	w.mu.Lock()
	if w.waiting {
		w.waiting = false
		w.set(nil)
	}
	w.mu.Unlock()
}

// run scans the tree whenever the output has been quiet for quietScan,
// then again at doubling intervals up to maxScanInterval; output or input
// brings it back to quietScan. A read seen on two scans in a row, with no
// input between them, is a wait.
func (w *inputWatch) run() {
	defer close(w.done)
	buf := make([]byte, 4096)
	interval := quietScan
	timer := time.NewTimer(quietScan)
	defer timer.Stop()
	var cand *candidate // a read seen, not yet a wait
	for {
		w.sleepy.Store(interval > quietScan)
		select {
		case <-w.stop:
			return
		case <-w.kick:
			interval = quietScan
			timer.Reset(quietScan)
			continue
		case <-timer.C:
		}
		// The cost rule: no scan of a job that printed in the last quietScan.
		if quiet := time.Since(time.Unix(0, w.lastOut.Load())); quiet < quietScan {
			interval = quietScan
			timer.Reset(quietScan - quiet)
			continue
		}
		// Output still in the pipe (or the terminal) is output not drained
		// yet: a wait published now would return a yield without what the
		// program printed before it read.
		if w.outputPending() {
			interval = quietScan
			timer.Reset(quietScan)
			continue
		}
		w.mu.Lock()
		waiting, cur := w.waiting, w.cur
		w.mu.Unlock()
		var g sighting
		var found bool
		if waiting && (w.stdin == nil || pipeUnread(w.stdin) == 0) {
			// A wait in progress: one look at the reading thread says
			// whether it goes on, without listing the tree.
			g, found = recheck(cur, w.tgt, buf)
		}
		if !found {
			g, found = w.scan(buf)
		}
		now := time.Now()
		w.mu.Lock()
		switch {
		case !found:
			cand = nil
			if w.waiting {
				w.waiting = false
				w.set(nil)
			}
		case w.waiting && g.r == w.cur:
			// The same wait goes on (in the same call or a later one).
		case cand != nil && cand.r == g.r && cand.inputs == w.inputs:
			if since, ok := cand.confirms(g, now); ok {
				w.waiting, w.cur, cand = true, g.r, nil
				w.set(w.describe(g.r, since))
			}
		default:
			cand = &candidate{r: g.r, inputs: w.inputs, first: now, call: now, timeout: g.timeout}
		}
		w.mu.Unlock()
		if cand == nil {
			interval = min(2*interval, maxScanInterval)
		} else {
			interval = quietScan // the next sighting comes soon
		}
		timer.Reset(interval)
	}
}

// scan looks for a thread of the tree blocked reading the job's input.
func (w *inputWatch) scan(buf []byte) (sighting, bool) {
	if w.stdin != nil && pipeUnread(w.stdin) > 0 {
		return sighting{}, false // input is there: whoever reads it is not waiting
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxScanInterval)
	defer cancel()
	pids, err := w.tree.Pids(ctx)
	if err != nil || len(pids) == 0 {
		return sighting{}, false
	}
	return findReader(pids, w.tgt, buf)
}

// describe makes the Waiting of reader r, first seen at since.
func (w *inputWatch) describe(r reader, since time.Time) *Waiting {
	kind := WaitLine
	if w.kind != nil {
		kind = w.kind()
	}
	return &Waiting{Since: since, Pid: r.pid, Argv: procArgv(r.pid), Kind: kind, Prompt: w.prompt()}
}

// lastLinePrompt returns the prompt of a pipe job: the last unterminated
// line of the stream written last, cleaned (budget.CleanLine), without
// trailing spaces (as a terminal's row), its last MaxPromptChars characters.
func lastLinePrompt(out, err *retained) string {
	r := out
	if err.lastWrite.Load() > out.lastWrite.Load() {
		r = err
	}
	total := r.tail.Counts().TotalBytes
	data, _ := r.tail.Since(max(0, total-4*MaxPromptChars*utf8.UTFMax))
	if len(data) == 0 || data[len(data)-1] == '\n' {
		return ""
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[i+1:]
	}
	return clipPrompt(strings.TrimRight(budget.CleanLine(data), " "))
}

// clipPrompt keeps the last MaxPromptChars characters of s.
func clipPrompt(s string) string {
	n := utf8.RuneCountInString(s)
	for n > MaxPromptChars {
		_, size := utf8.DecodeRuneInString(s)
		s, n = s[size:], n-1
	}
	return s
}
