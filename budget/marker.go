package budget

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/corral-sh/corral/internal/utf8cut"
)

// The fixed parts of the markers (spec §3). They are public: harnesses and
// models match on them.
const (
	spillPrefix = " Full output saved to "
	spillSuffix = " — Grep it, or Read it with offset/limit."
	narrowHint  = " Narrow the request to see more."
	ellipsis    = "…"
)

// markerKind selects one of the marker forms.
type markerKind int

const (
	markHead     markerKind = iota // kept the first X of N lines
	markTail                       // kept the last Y of N lines
	markHeadTail                   // kept the first X and the last Y of N lines
	markSingle                     // no complete line fits; a prefix or suffix of one line
)

// markerSpec holds what a marker states.
type markerSpec struct {
	kind        markerKind
	first, last int64 // kept lines at the head and at the tail
	total       int64 // lines in the whole stream
	keptBytes   int64 // single-line form: bytes kept of the line
	lineBytes   int64 // single-line form: the line's length
	lim         Limits
}

// marker renders the marker for m, naming spillPath when it is non-empty
// and saying what of the stream it holds (kept).
// The result is at most MaxMarkerBytes long: an absurdly long path is
// shortened in the middle with "…".
func marker(m markerSpec, spillPath string, kept SpillKept) string {
	build := func(path string) string {
		var b strings.Builder
		b.Grow(160 + len(path))
		b.WriteString("[truncated: ")
		switch m.kind {
		case markSingle:
			b.WriteString("no complete line fits the ")
			b.WriteString(bytesText(m.lim.MaxBytes))
			b.WriteString(" limit; kept ")
			b.WriteString(strconv.FormatInt(m.keptBytes, 10))
			b.WriteString(" bytes of a single ")
			b.WriteString(strconv.FormatInt(m.lineBytes, 10))
			b.WriteString("-byte line.")
		default:
			switch m.kind {
			case markHead:
				b.WriteString("kept the first ")
				b.WriteString(strconv.FormatInt(m.first, 10))
			case markTail:
				b.WriteString("kept the last ")
				b.WriteString(strconv.FormatInt(m.last, 10))
			case markHeadTail:
				b.WriteString("kept the first ")
				b.WriteString(strconv.FormatInt(m.first, 10))
				b.WriteString(" and the last ")
				b.WriteString(strconv.FormatInt(m.last, 10))
			}
			b.WriteString(" of ")
			b.WriteString(strconv.FormatInt(m.total, 10))
			b.WriteString(" lines; limit ")
			b.WriteString(strconv.Itoa(m.lim.MaxLines))
			b.WriteString(" lines / ")
			b.WriteString(bytesText(m.lim.MaxBytes))
			b.WriteString(".")
		}
		if path != "" {
			b.WriteString(spillSentence(kept, path))
		} else {
			b.WriteString(narrowHint)
		}
		b.WriteString("]")
		return b.String()
	}
	return fitPath(build, spillPath)
}

// binaryLine renders the one line that replaces binary output.
func binaryLine(totalBytes int64, spillPath string, kept SpillKept) string {
	return fitPath(func(path string) string {
		s := "[binary output: " + strconv.FormatInt(totalBytes, 10) + " bytes"
		if path != "" {
			s += binarySaved(kept, path)
		}
		return s + "]"
	}, spillPath)
}

// fitPath renders build(path) with path made printable and, when the result
// would exceed MaxMarkerBytes, shortened in the middle.
func fitPath(build func(path string) string, path string) string {
	path = printable(path)
	s := build(path)
	if len(s) <= MaxMarkerBytes || path == "" {
		return s
	}
	room := len(path) - (len(s) - MaxMarkerBytes) - len(ellipsis)
	return build(shortenMiddle(path, max(room, 0)))
}

// shortenMiddle keeps at most room bytes of s, half from each end, cut on
// character boundaries, joined by "…".
func shortenMiddle(s string, room int) string {
	head := utf8cut.Prefix([]byte(s), room/2)
	tail := len(s) - utf8cut.Suffix([]byte(s), room-room/2)
	return s[:head] + ellipsis + s[tail:]
}

// Printable returns s as valid UTF-8 (invalid bytes become U+FFFD) with
// every character that can break or disguise a line shown as '?' (see
// isControl), so that a path or a command can never break the line of a
// marker, a batch header or a history entry. It is pure and safe for
// concurrent use.
func Printable(s string) string { return printable(s) }

// printable returns s as valid UTF-8 without control characters, so that a
// path can never break the marker's line.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return '?'
		}
		return r
	}, s)
}

// isControl reports whether r can break or disguise a line: a C0 control
// character, DEL, a C1 control character (U+0080–U+009F: U+0085 is a line
// break to some readers, U+009B a terminal's CSI), the Unicode line and
// paragraph separators (U+2028, U+2029), or a bidirectional formatting
// character (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069: Unicode
// UAX #9, the "Trojan Source" reorderings, CVE-2021-42574).
func isControl(r rune) bool {
	switch {
	case r < 0x20 || 0x7f <= r && r <= 0x9f:
		return true
	case r < 0x61c:
		return false
	}
	switch r {
	case 0x61c, 0x200e, 0x200f, 0x2028, 0x2029:
		return true
	}
	return 0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069
}

// bytesText renders a byte budget the way markers state it: "96KB" for a
// multiple of 1024, else "1000B".
func bytesText(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + "KB"
	}
	return strconv.Itoa(n) + "B"
}
