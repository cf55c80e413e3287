package budget

import (
	"errors"
	"fmt"
	"io"
	"regexp"
)

// grepLineBytes is how much of one line Grep matches against; the rest of a
// longer line is read past without being kept.
const grepLineBytes = 1 << 20

// GrepOptions bound a Grep. Zero fields mean the defaults: HeadLimit
// DefaultHeadLimit, MaxLineChars MaxLineChars; a negative field is an error
// wrapping ErrInvalid.
type GrepOptions struct {
	// HeadLimit is the most matches returned.
	HeadLimit int
	// MaxLineChars is where a matched line's text is clipped, in characters.
	MaxLineChars int
}

// GrepMatch is one matching line; Line is 1-based.
type GrepMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// GrepResult is the matches form of the spec's GrepResult (§5); its JSON
// names are a public contract.
type GrepResult struct {
	// Matches holds the matching lines in file order; never nil.
	Matches []GrepMatch `json:"matches"`
	// Count is len(Matches).
	Count int `json:"count"`
	// Files is the number of files with a match (0 or 1 here).
	Files int `json:"files"`
	// Truncated is true when more matches exist past HeadLimit.
	Truncated bool `json:"truncated"`
	// Partial is true when the file holds only part of the stream it was
	// written from; filled by the caller, as ReadResult.Partial.
	Partial bool `json:"partial,omitempty"`
	// Notice is model-facing prose: the limit that stopped the scan, how
	// many lines were clipped.
	Notice string `json:"notice,omitempty"`
}

// Grep returns the lines of r, a file named path, that re matches, with
// 1-based line numbers, stopping at HeadLimit matches (Truncated is then true
// if another match follows). Each line's text is clipped at MaxLineChars
// characters and made valid UTF-8; matching sees the first 1 MiB of a line.
// A binary file (IsBinary) is skipped: an empty result, not an error (spec §6
// rule 3). A nil re or a negative option is an error wrapping ErrInvalid; a
// read error is returned wrapped. The caller owns and closes r. Grep is safe
// for concurrent use.
func Grep(r io.Reader, path string, re *regexp.Regexp, o GrepOptions) (GrepResult, error) {
	if re == nil || o.HeadLimit < 0 || o.MaxLineChars < 0 {
		return GrepResult{}, fmt.Errorf("%w: grep needs a pattern and non-negative limits (headLimit=%d)", ErrInvalid, o.HeadLimit)
	}
	o.HeadLimit = cmpOr(o.HeadLimit, DefaultHeadLimit)
	o.MaxLineChars = cmpOr(o.MaxLineChars, MaxLineChars)
	res := GrepResult{Matches: []GrepMatch{}}
	lr := newLineReader(r, grepLineBytes)
	head, err := lr.br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) {
		return GrepResult{}, fmt.Errorf("budget: grep %s: %w", path, err)
	}
	if IsBinary(path, head) {
		return res, nil
	}
	var w window
	for n := 1; ; n++ {
		line, _, dropped, err := lr.next(true)
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return GrepResult{}, fmt.Errorf("budget: grep %s: %w", path, err)
		}
		if !re.Match(line) {
			continue
		}
		if len(res.Matches) == o.HeadLimit {
			res.Truncated = true
			break
		}
		text := w.clip(line, dropped, o.MaxLineChars)
		res.Matches = append(res.Matches, GrepMatch{Path: path, Line: n, Text: string(text)})
	}
	res.Count = len(res.Matches)
	if res.Count > 0 {
		res.Files = 1
	}
	res.Notice = w.grepNotice(o, res.Truncated)
	return res, nil
}

// grepNotice says what bounded a Grep.
func (w *window) grepNotice(o GrepOptions, truncated bool) string {
	s := ""
	if truncated {
		s = fmt.Sprintf("Stopped at headLimit=%d matches; narrow the pattern or raise headLimit to see more.", o.HeadLimit)
	}
	if w.clipped > 0 {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("%d matched %s clipped at %d characters.", w.clipped, plural(w.clipped, "line"), o.MaxLineChars)
	}
	return s
}
