package budget

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/corral-sh/corral/internal/utf8cut"
)

// ReadOptions select a Read window. Zero fields mean the defaults: Offset 1,
// Limit SearchMaxLines, MaxBytes SearchMaxBytes, MaxLineChars MaxLineChars.
// A negative field is an error wrapping ErrInvalid.
type ReadOptions struct {
	// Offset is the 1-based number of the first line of the window.
	Offset int
	// Limit is the most lines the window holds.
	Limit int
	// MaxBytes bounds the window's content (a positive value below 4 counts
	// as 4); the first line is always returned, clipped if need be.
	MaxBytes int
	// MaxLineChars is where a line is clipped, in characters.
	MaxLineChars int
}

// norm applies the defaults or reports a negative field.
func (o ReadOptions) norm() (ReadOptions, error) {
	if o.Offset < 0 || o.Limit < 0 || o.MaxBytes < 0 || o.MaxLineChars < 0 {
		return o, fmt.Errorf("%w: offset, limit and budgets must not be negative (offset=%d, limit=%d)", ErrInvalid, o.Offset, o.Limit)
	}
	o.Offset = cmpOr(o.Offset, 1)
	o.Limit = cmpOr(o.Limit, SearchMaxLines)
	o.MaxBytes = max(cmpOr(o.MaxBytes, SearchMaxBytes), minMaxBytes)
	o.MaxLineChars = cmpOr(o.MaxLineChars, MaxLineChars)
	return o, nil
}

// cmpOr returns v, or def when v is zero.
func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// ReadResult is a Read window (spec §5 ReadResult); its JSON names are a
// public contract.
type ReadResult struct {
	// Path is the path the caller passed.
	Path string `json:"path"`
	// Root is filled by the caller ("scratch" for spill files).
	Root string `json:"root"`
	// Content is the window, byte-faithful apart from clipped lines and
	// invalid UTF-8 and NUL bytes replaced with U+FFFD; it carries no
	// marker.
	Content string `json:"content"`
	// Offset is the 1-based first line of the window.
	Offset int `json:"offset"`
	// LineCount is the number of lines in Content.
	LineCount int `json:"lineCount"`
	// TotalLines is the file's line count, present only once the end of
	// the file was reached.
	TotalLines *int `json:"totalLines,omitempty"`
	// FileBytes is the file's size as the caller passed it.
	FileBytes int64 `json:"fileBytes"`
	// Truncated is true when the window stopped before the end of the file
	// or clipped a line.
	Truncated bool `json:"truncated"`
	// Partial is true when the file holds only part of the stream it was
	// written from (a spill that stopped at its cap); filled by the
	// caller, which then says in Notice how much of the stream it holds.
	Partial bool `json:"partial,omitempty"`
	// Notice is model-facing prose: the next offset, the budget that
	// stopped the window, how many lines were clipped.
	Notice string `json:"notice,omitempty"`
}

// Read returns the window of lines o selects from r, a file of size bytes
// named path. It streams r and keeps at most 4×MaxLineChars bytes of any one
// line, so a multi-megabyte file or a giant line costs bounded memory; a file
// is never refused for its size. Binary content (IsBinary on path and the
// first 4 KiB) is refused with an error wrapping ErrBinary; a negative option
// with one wrapping ErrInvalid; a read error is returned wrapped. The caller
// owns and closes r. Read is safe for concurrent use.
func Read(r io.Reader, path string, size int64, o ReadOptions) (ReadResult, error) {
	o, err := o.norm()
	if err != nil {
		return ReadResult{}, err
	}
	lr := newLineReader(r, utf8.UTFMax*o.MaxLineChars)
	head, err := lr.br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) {
		return ReadResult{}, fmt.Errorf("budget: read %s: %w", path, err)
	}
	if IsBinary(path, head) {
		return ReadResult{}, fmt.Errorf("budget: read %s: %w", path, ErrBinary)
	}
	res := ReadResult{Path: path, Offset: o.Offset, FileBytes: size}

	// Skip to the window.
	skipped := 0
	for skipped < o.Offset-1 {
		if _, _, _, err := lr.next(false); errors.Is(err, io.EOF) {
			res.TotalLines = &skipped
			res.Notice = fmt.Sprintf("offset=%d is past the end of the file (%d lines).", o.Offset, skipped)
			return res, nil
		} else if err != nil {
			return ReadResult{}, fmt.Errorf("budget: read %s: %w", path, err)
		}
		skipped++
	}

	// Fill the window until the line limit, the byte budget or the end.
	var content strings.Builder
	var w window
	eof, byBudget := false, false
	for res.LineCount < o.Limit {
		line, nl, dropped, err := lr.next(true)
		if errors.Is(err, io.EOF) {
			eof = true
			break
		} else if err != nil {
			return ReadResult{}, fmt.Errorf("budget: read %s: %w", path, err)
		}
		text := w.clip(line, dropped, o.MaxLineChars)
		if nl {
			text = append(text, '\n')
		}
		if content.Len()+len(text) > o.MaxBytes {
			if res.LineCount > 0 {
				byBudget = true
				break
			}
			text = text[:utf8cut.Prefix(text, o.MaxBytes)] // one line always shows
			w.overBudget = true
		}
		content.Write(text)
		res.LineCount++
	}
	if !eof && !byBudget {
		eof = !lr.more()
	}
	if size < 0 && eof {
		res.FileBytes = lr.n
	}
	res.Content = content.String()
	if eof {
		total := o.Offset - 1 + res.LineCount
		res.TotalLines = &total
	}
	res.Truncated = !eof || w.clipped > 0 || w.overBudget
	res.Notice = w.notice(o, res, eof, byBudget)
	return res, nil
}

// window counts what Read and Grep changed in the lines they return.
type window struct {
	clipped, invalids, nuls int
	overBudget              bool // Read clipped its first line to the byte budget
	buf                     []byte
}

// clip returns line cut to maxChars characters (bytes past them, or
// dropped ones, make it clipped) with invalid UTF-8 and NUL bytes (which
// the 4 KiB binary sniff did not see) replaced by U+FFFD. The result is
// valid until the next call.
func (w *window) clip(line []byte, dropped bool, maxChars int) []byte {
	if !dropped && len(line) <= maxChars && plain(line) {
		w.buf = append(w.buf[:0], line...)
		return w.buf
	}
	out := w.buf[:0]
	chars := 0
	for i := 0; i < len(line); chars++ {
		if chars == maxChars {
			dropped = true
			break
		}
		r, n := utf8.DecodeRune(line[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
			w.invalids++
		} else if r == 0 {
			out = append(out, "\uFFFD"...)
			w.nuls++
		} else {
			out = append(out, line[i:i+n]...)
		}
		i += n
	}
	if dropped {
		w.clipped++
	}
	w.buf = out
	return out
}

// notice says what bounded the window and how to go on.
func (w *window) notice(o ReadOptions, res ReadResult, eof, byBudget bool) string {
	var parts []string
	if !eof {
		last := o.Offset + res.LineCount - 1
		why := fmt.Sprintf("limit=%d", o.Limit)
		if byBudget {
			why = "the " + bytesText(o.MaxBytes) + " read budget"
		}
		parts = append(parts, fmt.Sprintf("Showing lines %d-%d; stopped at %s. Use offset=%d to continue.", o.Offset, last, why, last+1))
	}
	if w.clipped > 0 {
		parts = append(parts, fmt.Sprintf("%d %s clipped at %d characters.", w.clipped, plural(w.clipped, "line"), o.MaxLineChars))
	}
	if w.overBudget {
		parts = append(parts, fmt.Sprintf("Line %d was clipped to the %s read budget.", o.Offset, bytesText(o.MaxBytes)))
	}
	if w.invalids > 0 {
		parts = append(parts, fmt.Sprintf("%d invalid UTF-8 %s replaced with U+FFFD.", w.invalids, plural(w.invalids, "byte")))
	}
	if w.nuls > 0 {
		parts = append(parts, fmt.Sprintf("%d NUL %s replaced with U+FFFD.", w.nuls, plural(w.nuls, "byte")))
	}
	return strings.Join(parts, " ")
}

// plural returns word, with an "s" unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
