package budget

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/corral-sh/corral/internal/utf8cut"
)

// Batch view defaults.
const (
	// DefaultBatchBytes is the budget of a batch view (256 KiB).
	DefaultBatchBytes = 256 << 10
	// MaxHeaderChars bounds the command shown in a batch view's header
	// line, in characters.
	MaxHeaderChars = 200
)

// BatchItem is one result of a batch as its view shows it.
type BatchItem struct {
	// Command is the command line; the header shows its first line.
	Command string
	// Text is the result rendered for the model (the MCP bash tool's text).
	Text string
}

// BatchOptions configure BatchView.
type BatchOptions struct {
	// MaxBytes is the budget of the kept text; 0 or less is
	// DefaultBatchBytes, and a positive value below 4 counts as 4.
	MaxBytes int
	// Session names the session whose journal holds every result whole;
	// the marker then tells the reader where to find them. "" means the
	// results were not journaled, and the marker says they are whole in
	// the batch's results instead.
	Session string
}

// Batch is the model-facing text of a batch and what it kept.
type Batch struct {
	// View is the text: every result after its header line, in order, or,
	// when that exceeds the budget, the marker line and a tail of it.
	View string
	// Truncated is true when View is a compacted tail; the marker is then
	// its first line.
	Truncated bool
	// KeptResults counts the results View shows in full or in part.
	KeptResults int
	// ViewBytes is the length of View's text without the marker line
	// (all of View when not truncated); at most the budget when truncated.
	ViewBytes int
	// TotalBytes is the length of the whole text before compaction.
	TotalBytes int
}

// BatchView renders items as one text: for the k-th of N items the header
// line "[k/N] $ <first line of its command>" (at most MaxHeaderChars
// characters, control characters shown as '?'), then its text, ending with
// a newline. When the whole exceeds the budget it keeps a tail: the last
// items whole, the first one that does not fit cut to its tail on a line
// boundary, and in front the marker line
//
//	[batch compacted: kept the last K of N results (B of T bytes); limit 256KB. ...]
//
// K counting the items shown in full or in part, B the bytes kept (the
// marker, at most MaxMarkerBytes, lies outside the budget), T the bytes of
// the whole. When not even the last line fits, a character-safe suffix of
// it is kept, never an empty view. The item that is cut keeps its header
// line in front of its tail, so the reader always knows whose output it
// reads. The text is always valid UTF-8 (invalid bytes become U+FFFD), and
// apart from that header line the kept tail is a suffix of the whole.
//
// BatchView is pure and safe for concurrent use.
func BatchView(items []BatchItem, o BatchOptions) Batch {
	limit := o.MaxBytes
	if limit <= 0 {
		limit = DefaultBatchBytes
	}
	limit = max(limit, minMaxBytes)
	n := len(items)
	sections := make([]string, n)
	total := 0
	for i, it := range items {
		sections[i] = batchSection(i+1, n, it)
		total += len(sections[i])
	}
	if total <= limit {
		return Batch{View: strings.Join(sections, ""), KeptResults: n, ViewBytes: total, TotalBytes: total}
	}

	// Whole items from the end while they fit; then the tail of the one
	// that does not (i), on a line boundary.
	size, kept, i := 0, 0, n-1
	for ; size+len(sections[i]) <= limit; i-- {
		size += len(sections[i])
		kept++
	}
	part := cutSection(sections[i], limit-size, size == 0)
	if part != "" {
		kept++
	}
	var b strings.Builder
	mark := batchMarker(kept, n, size+len(part), total, limit, o.Session)
	b.Grow(len(mark) + 1 + size + len(part))
	b.WriteString(mark)
	b.WriteByte('\n')
	b.WriteString(part)
	for _, s := range sections[i+1:] {
		b.WriteString(s)
	}
	return Batch{View: b.String(), Truncated: true, KeptResults: kept, ViewBytes: size + len(part), TotalBytes: total}
}

// batchSection renders the k-th of n items: its header line and its text,
// ending with a newline, valid UTF-8.
func batchSection(k, n int, it BatchItem) string {
	text := strings.ToValidUTF8(it.Text, "\uFFFD")
	var b strings.Builder
	b.Grow(len(text) + 32 + MaxHeaderChars)
	b.WriteByte('[')
	b.WriteString(strconv.Itoa(k))
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(n))
	b.WriteString("] $ ")
	b.WriteString(HeaderCommand(it.Command))
	b.WriteByte('\n')
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	return b.String()
}

// HeaderCommand is the command as a batch header shows it: its first line,
// valid UTF-8 with control characters (tabs included) shown as '?', at most
// MaxHeaderChars characters, the last of them "…" when it was clipped.
func HeaderCommand(cmd string) string {
	line, _, _ := strings.Cut(cmd, "\n")
	line = printable(strings.TrimSuffix(line, "\r"))
	if utf8.RuneCountInString(line) <= MaxHeaderChars {
		return line
	}
	i, count := 0, 0
	for i = range line {
		if count == MaxHeaderChars-1 {
			break
		}
		count++
	}
	return line[:i] + ellipsis
}

// cutSection cuts a section to at most room bytes: its header line, then
// the longest tail of its text that starts a line; "" when not even the
// header and one line fit. With last (nothing else is kept) it never
// returns "": a character-safe suffix of the text follows the header, or,
// when the header alone is too long, a suffix of the section.
func cutSection(s string, room int, last bool) string {
	if len(s) <= room {
		return s
	}
	i := strings.IndexByte(s, '\n') + 1 // batchSection ends every header with one
	header, body := s[:i], s[i:]
	if len(header) < room {
		if tail := lineTail(body, room-len(header)); tail != "" {
			return header + tail
		}
		if last {
			return header + body[len(body)-utf8cut.Suffix([]byte(body), room-len(header)):]
		}
		return ""
	}
	// No room for the header: a tail of the section alone, for the last
	// result only, so that the view is never empty.
	if !last {
		return ""
	}
	if tail := lineTail(s, room); tail != "" {
		return tail
	}
	return s[len(s)-utf8cut.Suffix([]byte(s), room):]
}

// lineTail returns the longest suffix of s that starts a line (at 0 or
// after a newline) and is at most room bytes, "" when none is.
func lineTail(s string, room int) string {
	start := len(s) - room
	if start <= 0 {
		return s
	}
	if s[start-1] == '\n' {
		return s[start:]
	}
	j := strings.IndexByte(s[start:], '\n')
	if j < 0 {
		return ""
	}
	return s[start+j+1:]
}

// batchMarker renders the batch marker (DESIGN.md, Batch), at most
// MaxMarkerBytes long (an absurd session name is shortened in the middle).
func batchMarker(kept, n, keptBytes, total, limit int, session string) string {
	return fitPath(func(session string) string {
		var b strings.Builder
		b.WriteString("[batch compacted: kept the last ")
		b.WriteString(strconv.Itoa(kept))
		b.WriteString(" of ")
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" results (")
		b.WriteString(strconv.Itoa(keptBytes))
		b.WriteString(" of ")
		b.WriteString(strconv.Itoa(total))
		b.WriteString(" bytes); limit ")
		b.WriteString(bytesText(limit))
		b.WriteString(".")
		if session != "" {
			b.WriteString(" Every result is kept whole in the session journal — read one with GET /v1/sessions/")
			b.WriteString(session)
			b.WriteString("/results/<rid>.]")
		} else {
			b.WriteString(" Every result is kept whole in the batch's results.]")
		}
		return b.String()
	}, session)
}
