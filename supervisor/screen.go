package supervisor

import (
	"fmt"

	"regexp"
	"strings"
	"sync"

	"github.com/corral-sh/corral/budget"
)

// Screen is a terminal as a person sees it now (docs/terminals.md): the
// text of each row, trailing blanks trimmed, the cursor (0-based), whether
// the alternate screen (full-screen programs: vi, less, top) is shown, and
// the title the program set.
type Screen struct {
	Cols      int      `json:"cols"`
	Rows      int      `json:"rows"`
	Lines     []string `json:"lines"`
	Cursor    Cursor   `json:"cursor"`
	AltScreen bool     `json:"altScreen"`
	Title     string   `json:"title"`
}

// Cursor is a position on a Screen, 0-based.
type Cursor struct {
	Row int `json:"row"`
	Col int `json:"col"`
}

// Emulator is a terminal emulator (Config.Emulator): it renders what a
// program writes to its terminal as a person sees it. Its methods are
// called one at a time.
type Emulator interface {
	// Write feeds it the program's output.
	Write(p []byte) (int, error)
	// Resize changes the screen's size; Size returns it.
	Resize(cols, rows int)
	Size() (cols, rows int)
	// Lines returns the text of each row, trailing blanks trimmed.
	Lines() []string
	// Cursor returns the cursor's position, 0-based.
	Cursor() (row, col int)
	// AltScreen reports whether the alternate screen is shown now,
	// UsedAltScreen whether it was ever shown.
	AltScreen() bool
	UsedAltScreen() bool
	// Title returns the title the program set last, and whether it set
	// one.
	Title() (string, bool)
	// Close releases it.
	Close() error
}

// screen renders a terminal job's output with a terminal emulator
// (Config.Emulator). It is fed lazily, when someone looks (Screen, a
// prompt, a Result's view), from the job's tail ring by byte cursor, so the
// drain never waits for it. When the ring has moved past what it was fed,
// it starts over from what the ring holds (at most the capture ceiling).
// Its memory is the emulator's, for the terminal's size (its scrollback is
// off). Safe for concurrent use.
type screen struct {
	newEm  func(cols, rows int) Emulator
	mu     sync.Mutex
	em     Emulator       // guarded by mu
	fed    int64          // guarded by mu; bytes of the stream fed so far
	title  string         // guarded by mu
	alt    bool           // guarded by mu; the alternate screen was ever shown
	moves  int            // guarded by mu; cursor-addressing sequences fed
	homes  int            // guarded by mu; redraws from the top-left corner fed
	lines  int            // guarded by mu; newlines fed
	closed bool           // guarded by mu
	wg     sync.WaitGroup // the emulators' answer readers
}

// cursorMoves matches the CSI sequences that address the cursor or erase the
// screen: CUP, HVP, CUU/CUD/CUF/CUB, CHA, VPA, ED. Compiled at the first
// terminal's first output, not in every process's start (a corral run
// without a terminal never needs it).
var cursorMoves = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\x1b\[[0-9;?]*[HfABCDGdJ]`) })

// cursorHomes matches the start of a redraw of the whole screen: the cursor
// sent to the top-left corner (CUP with no or 1;1 parameters), or the whole
// screen erased (ED 2), once when both come together (top's frames).
var cursorHomes = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\x1b\[(?:1?(?:;1?)?)?H(?:\x1b\[2J)?|\x1b\[2J`)
})

// newScreen returns a screen whose emulators newEm makes; its emulator is
// made at the first look, so a terminal job nobody looks at costs none.
func newScreen(newEm func(cols, rows int) Emulator) *screen { return &screen{newEm: newEm} }

// reset starts a new emulator of size sz. Called with mu held (or before
// the screen is shared).
func (s *screen) reset(sz TTYSize) {
	if s.em != nil {
		s.em.Close()
	}
	s.em = s.newEm(sz.Cols, sz.Rows)
}

// update feeds the emulator what the stream holds past what it was fed.
// r is the job's stdout capture; sz the terminal's size now.
func (s *screen) update(r *retained, sz TTYSize) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || r.tail == nil {
		return
	}
	if s.em == nil {
		s.reset(sz)
	}
	if cols, rows := s.em.Size(); cols != sz.Cols || rows != sz.Rows {
		s.em.Resize(sz.Cols, sz.Rows)
	}
	data, start := r.tail.Since(s.fed)
	if start > s.fed {
		// The ring moved on: what lies between is lost to the emulator.
		s.reset(sz)
	}
	if len(data) == 0 {
		return
	}
	s.moves += len(cursorMoves().FindAllIndex(data, -1))
	s.homes += len(cursorHomes().FindAllIndex(data, -1))
	s.lines += strings.Count(string(data), "\n")
	_, _ = s.em.Write(data) // an emulator takes all it is given
	s.fed = start + int64(len(data))
	if t, ok := s.em.Title(); ok {
		s.title = t
	}
	s.alt = s.alt || s.em.UsedAltScreen()
}

// snapshot returns the screen as it is now.
func (s *screen) snapshot() Screen {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.em == nil {
		return Screen{Lines: []string{}}
	}
	w, h := s.em.Size()
	sc := Screen{Cols: w, Rows: h, Lines: s.em.Lines(), AltScreen: s.em.AltScreen(), Title: s.title}
	sc.Cursor.Row, sc.Cursor.Col = s.em.Cursor()
	return sc
}

// tui reports whether the stream is a full-screen program's, whose Result,
// yield and read views show the screen rather than the stream
// (docs/terminals.md): it showed the alternate screen, redrew its screen
// from the top-left corner twice or more (top), or its cursor-addressing
// sequences outnumber its lines.
func (s *screen) tui() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.alt || s.homes >= 2 || s.moves > max(s.lines, 8)
}

// close stops the emulator. A snapshot after it still shows the last
// screen.
func (s *screen) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && s.em != nil {
		s.em.Close()
	}
	s.closed = true
}

// view returns the model view of a terminal command's stdout: the stream's
// view as shaped, or, for a full-screen program (tui), the screen's text,
// with a note for stderr saying so. info then describes the screen text as
// the view it is; its counters of the stream stay.
func (p *proc) screenView(view string, info budget.Info) (string, budget.Info, string) {
	p.screen.update(p.out, p.term.getSize())
	if !p.screen.tui() {
		return view, info, ""
	}
	text := p.screen.snapshot().text()
	info.KeptBytes, info.KeptLines = int64(len(text)), int64(strings.Count(text, "\n"))
	return text, info, "[corral: stdout shows the terminal's screen, as a full-screen program left it; " +
		"the escape sequences that drew it are in the job's output" +
		pick(info.SpillPath != "", " and the spill file", "") + ".]"
}

// text renders sc as a model view: its lines, trailing blank lines dropped.
func (sc Screen) text() string {
	lines := sc.Lines
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// promptLine is the prompt of a terminal wait: the cursor's row up to the
// cursor, its last MaxPromptChars characters.
func (sc Screen) promptLine() string {
	if sc.Cursor.Row < 0 || sc.Cursor.Row >= len(sc.Lines) {
		return ""
	}
	line := []rune(sc.Lines[sc.Cursor.Row])
	if sc.Cursor.Col < len(line) {
		line = line[:sc.Cursor.Col]
	}
	return clipPrompt(strings.TrimRight(string(line), " "))
}

// tuiScreen returns the screen of a terminal job whose stream is a
// full-screen program's (screen.tui), as it is now; nil for every other job.
func (j *job) tuiScreen() *Screen {
	if j.term == nil {
		return nil
	}
	j.mu.Lock()
	p, sc, last, lastTUI := j.proc, j.screen, j.lastScreen, j.lastTUI
	j.mu.Unlock()
	switch {
	case sc == nil && lastTUI:
		c := *last
		return &c
	case sc == nil || p == nil:
		return nil
	}
	sc.update(p.out, p.term.getSize())
	if !sc.tui() {
		return nil
	}
	now := sc.snapshot()
	return &now
}

// Screen renders the terminal of a job run with a TTY as it looks now
// (after its end: as the job left it). Errors: ErrNotFound, ErrNoTerminal
// for a job without a terminal.
func (h *Jobs) Screen(id string) (Screen, error) {
	j, err := h.s.jobs.get(id)
	if err != nil {
		return Screen{}, err
	}
	if j.term == nil {
		return Screen{}, &RequestError{Reason: fmt.Sprintf("job %s runs without a terminal (start it with tty)", id), Kind: ErrNoTerminal}
	}
	j.mu.Lock()
	p, sc, last := j.proc, j.screen, j.lastScreen
	j.mu.Unlock()
	if sc == nil {
		return *last, nil
	}
	if p != nil {
		sc.update(p.out, p.term.getSize())
	}
	return sc.snapshot(), nil
}
