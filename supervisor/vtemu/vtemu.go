package vtemu

import (
	"io"
	"strings"

	"github.com/charmbracelet/x/vt"
)

// Emulator renders what a program writes to its terminal as a person sees
// it: a screen of the terminal's size, with no scrollback. It answers no
// query (device attributes, cursor reports): it is a view. It is not safe
// for concurrent use.
type Emulator struct {
	em       *vt.Emulator
	title    string
	titleSet bool
	usedAlt  bool
}

// New returns an emulator of cols columns and rows rows.
func New(cols, rows int) *Emulator {
	e := &Emulator{em: vt.NewEmulator(cols, rows)}
	e.em.SetScrollbackSize(0)
	e.em.SetCallbacks(vt.Callbacks{
		Title: func(t string) { e.title, e.titleSet = t, true },
		AltScreen: func(on bool) {
			if on {
				e.usedAlt = true
			}
		},
	})
	// The emulator answers queries into a pipe a real terminal would send
	// to the program. With the pipe's write end closed the answers fail at
	// once instead of blocking Write until someone reads them.
	if c, ok := e.em.InputPipe().(io.Closer); ok {
		c.Close()
	}
	return e
}

// Write feeds the emulator the program's output.
func (e *Emulator) Write(p []byte) (int, error) { return e.em.Write(p) }

// Resize changes the screen's size.
func (e *Emulator) Resize(cols, rows int) { e.em.Resize(cols, rows) }

// Size returns the screen's size.
func (e *Emulator) Size() (cols, rows int) { return e.em.Width(), e.em.Height() }

// Lines returns the text of each row, trailing blanks trimmed; a wide
// character counts once.
func (e *Emulator) Lines() []string {
	w, h := e.em.Width(), e.em.Height()
	lines := make([]string, h)
	var b strings.Builder
	for y := range h {
		b.Reset()
		for x := 0; x < w; {
			c := e.em.CellAt(x, y)
			if c == nil || c.Content == "" {
				b.WriteByte(' ')
				x++
				continue
			}
			b.WriteString(c.Content)
			x += max(1, c.Width)
		}
		lines[y] = strings.TrimRight(b.String(), " ")
	}
	return lines
}

// Cursor returns the cursor's position, 0-based.
func (e *Emulator) Cursor() (row, col int) {
	p := e.em.CursorPosition()
	return p.Y, p.X
}

// AltScreen reports whether the alternate screen is shown now;
// UsedAltScreen whether it was ever shown.
func (e *Emulator) AltScreen() bool     { return e.em.IsAltScreen() }
func (e *Emulator) UsedAltScreen() bool { return e.usedAlt }

// Title returns the title the program set last, and whether it set one.
func (e *Emulator) Title() (string, bool) { return e.title, e.titleSet }

// Close releases the emulator.
func (e *Emulator) Close() error { return e.em.Close() }
