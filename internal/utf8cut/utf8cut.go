package utf8cut

import "unicode/utf8"

// Complete returns the length of p without a trailing incomplete UTF-8
// sequence: a lead byte followed by fewer continuation bytes than it needs,
// which later bytes of the stream may complete. It returns len(p) when p
// ends on a character boundary or in bytes that are not UTF-8.
func Complete(p []byte) int {
	for back := 1; back < utf8.UTFMax && back <= len(p); back++ {
		b := p[len(p)-back]
		if b < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(p[len(p)-back:]) {
				return len(p) - back
			}
			break
		}
	}
	return len(p)
}

// Start returns the index of the first byte of p that does not continue a
// character begun before p: it skips at most utf8.UTFMax-1 leading
// continuation bytes. It returns 0 when p shows no character start in its
// first utf8.UTFMax bytes (not UTF-8, or too short to tell).
func Start(p []byte) int {
	for i := 0; i < utf8.UTFMax && i < len(p); i++ {
		if utf8.RuneStart(p[i]) {
			return i
		}
	}
	return 0
}

// Prefix returns the length of the longest prefix of p that is at most n
// bytes long and does not end inside a character.
func Prefix(p []byte, n int) int {
	if n >= len(p) {
		return len(p)
	}
	return Complete(p[:max(n, 0)])
}

// Suffix returns the length of the longest suffix of p that is at most n
// bytes long and does not start inside a character.
func Suffix(p []byte, n int) int {
	if n >= len(p) {
		return len(p)
	}
	s := p[len(p)-max(n, 0):]
	return len(s) - Start(s)
}
