package supervisor

import "testing"

// TestCursorHomes: the sequences that start a redraw of the whole screen,
// and those that do not.
func TestCursorHomes(t *testing.T) {
	for in, want := range map[string]int{
		"\x1b[H": 1, "\x1b[1;1H": 1, "\x1b[;H": 1, "\x1b[1H": 1, "\x1b[H\x1b[2J": 1, "\x1b[2J": 1,
		"\x1b[11H": 0, "\x1b[1;12H": 0, "\x1b[24;1H": 0, "\x1b[J": 0, "\x1b[0J": 0, "\x1b[H\x1b[Ktext\x1b[H": 2,
	} {
		if got := len(cursorHomes().FindAllStringIndex(in, -1)); got != want {
			t.Errorf("%q: %d homes, want %d", in, got, want)
		}
	}
}
