package budget

import (
	"bytes"
	"unicode/utf8"
)

// esc is the byte that starts every ANSI escape sequence.
const esc = 0x1b

// cleaner turns one raw line (without its '\n') into its model-view form
// and counts what it changed. A returned slice either aliases the input
// (nothing to change, the common case) or is freshly allocated, so results
// of earlier calls stay valid.
type cleaner struct {
	raw                        bool // only repair UTF-8
	escapes, redraws, invalids int64
}

// line returns the cleaned form of b, which holds no '\n'. It never adds or
// removes a line break.
func (c *cleaner) line(b []byte) []byte {
	if c.raw || !needsClean(b) {
		if plain(b) {
			return b
		}
		return c.repair(b)
	}
	out := c.stripEscapes(make([]byte, 0, len(b)), b)
	out = c.collapseRedraws(out)
	if !plain(out) {
		out = c.repair(out)
	}
	return out
}

// plain reports whether b is valid UTF-8 without NUL bytes: text a model
// can be shown as it is.
func plain(b []byte) bool {
	return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}

// needsClean reports whether b holds an escape or a carriage return.
func needsClean(b []byte) bool {
	for _, x := range b {
		if x == esc || x == '\r' {
			return true
		}
	}
	return false
}

// stripEscapes appends b to dst without its ANSI escape sequences.
func (c *cleaner) stripEscapes(dst, b []byte) []byte {
	for len(b) > 0 {
		i := bytes.IndexByte(b, esc)
		if i < 0 {
			return append(dst, b...)
		}
		dst = append(dst, b[:i]...)
		b = b[i+escLen(b[i:]):]
		c.escapes++
	}
	return dst
}

// escLen returns the length of the escape sequence at the start of b
// (b[0] == ESC), following ECMA-48 §5: CSI (ESC [ parameters intermediates
// final), the control strings OSC, DCS, SOS, PM and APC (ended by BEL or by
// ST, ESC \), nF sequences (ESC intermediates final) and two-character
// sequences. A sequence cut short by the end of the line, or broken by a byte
// that cannot belong to it, ends there; that byte is kept. A lone ESC is one
// byte long.
func escLen(b []byte) int {
	if len(b) < 2 {
		return len(b)
	}
	switch x := b[1]; {
	case x == '[':
		i := 2
		for i < len(b) && b[i] >= 0x30 && b[i] <= 0x3f {
			i++
		}
		for i < len(b) && b[i] >= 0x20 && b[i] <= 0x2f {
			i++
		}
		if i < len(b) && b[i] >= 0x40 && b[i] <= 0x7e {
			i++
		}
		return i
	case x == ']' || x == 'P' || x == 'X' || x == '^' || x == '_':
		for i := 2; i < len(b); i++ {
			switch {
			case b[i] == 0x07:
				return i + 1
			case b[i] == esc && i+1 < len(b) && b[i+1] == '\\':
				return i + 2
			case b[i] == esc:
				return i // a new sequence starts; this one was never ended
			}
		}
		return len(b)
	case x >= 0x20 && x <= 0x2f:
		i := 2
		for i < len(b) && b[i] >= 0x20 && b[i] <= 0x2f {
			i++
		}
		if i < len(b) && b[i] >= 0x30 && b[i] <= 0x7e {
			i++
		}
		return i
	case x >= 0x30 && x <= 0x7e:
		return 2
	}
	return 1
}

// collapseRedraws keeps what a terminal would finally show of a line redrawn
// with carriage returns: the last non-empty segment between them
// ("10%\r20%\r30%" shows "30%"). A '\r' that ends the line (the CR of CRLF)
// just disappears. b is modified in place.
func (c *cleaner) collapseRedraws(b []byte) []byte {
	if bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	var last []byte
	for seg := range bytes.SplitSeq(b, []byte{'\r'}) {
		if len(seg) == 0 {
			continue
		}
		if last != nil {
			c.redraws++
		}
		last = seg
	}
	return append(b[:0], last...)
}

// repair returns a copy of b with every byte that is not part of a valid
// UTF-8 sequence, and every NUL byte, replaced by U+FFFD. A NUL is valid
// UTF-8, but binary detection sniffs only the first 4 KiB: one further on
// would otherwise reach the model raw, where many consumers end a string.
func (c *cleaner) repair(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if b[i] == 0 {
			out = append(out, "\uFFFD"...)
			c.invalids++
			i++
			continue
		}
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
			c.invalids++
			i++
			continue
		}
		out = append(out, b[i:i+n]...)
		i += n
	}
	return out
}

// sniffLen is how much of the start of a stream or file is sniffed for
// binary content (spec §6 rule 3).
const sniffLen = 4 << 10

// looksBinary reports whether the first 4 KiB of b hold a NUL byte or are
// more than 30% non-printable. Text control characters (tab, line breaks,
// backspace, BEL, ESC) are printable here, so coloured output is text; bytes
// that are not valid UTF-8 are not. A character cut by the end of the window
// is not judged.
func looksBinary(b []byte) bool {
	b = b[:min(len(b), sniffLen)]
	bad := 0
	for i := 0; i < len(b); {
		x := b[i]
		if x == 0 {
			return true
		}
		if x < utf8.RuneSelf {
			if x == 0x7f || x < 0x20 && !textControl(x) {
				bad++
			}
			i++
			continue
		}
		if !utf8.FullRune(b[i:]) {
			break
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			bad++
		}
		i += n
	}
	return bad*10 > len(b)*3
}

// textControl reports whether the control byte x occurs in ordinary text.
func textControl(x byte) bool {
	switch x {
	case '\a', '\b', '\t', '\n', '\v', '\f', '\r', esc:
		return true
	}
	return false
}
