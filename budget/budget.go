package budget

import (
	"errors"
	"fmt"
)

// Limits of the model-facing views (spec §2). Every one is a default a caller
// may override through Limits, ReadOptions or GrepOptions.
const (
	// DefaultMaxBytes is the shell result budget per stream (96 KiB).
	DefaultMaxBytes = 96 << 10
	// DefaultMaxLines is the shell result line budget per stream.
	DefaultMaxLines = 4000
	// SearchMaxBytes is the Read/Grep result budget (48 KiB).
	SearchMaxBytes = 48 << 10
	// SearchMaxLines is the default Read window in lines.
	SearchMaxLines = 2000
	// MaxLineChars is where Read and Grep clip a line, in characters.
	MaxLineChars = 2000
	// DefaultHeadLimit is how many Grep matches are returned by default.
	DefaultHeadLimit = 200
	// MaxMarkerBytes bounds the length of a truncation marker.
	MaxMarkerBytes = 512
)

// minMaxBytes is the smallest byte budget Shape and Read honour: one
// character of any size must fit, so that a cut never yields an empty
// payload (spec §6 rule 4).
const minMaxBytes = 4

var (
	// ErrInvalid reports a bad argument (INVALID_ARGUMENT on the wire).
	ErrInvalid = errors.New("budget: invalid argument")
	// ErrBinary reports binary content that is refused rather than shown
	// (TOOL_BINARY_CONTENT on the wire).
	ErrBinary = errors.New("budget: binary content")
)

// Policy says which part of a stream survives a cut.
type Policy string

// The cut policies. The zero value "" means PolicyHead wherever a Policy is
// accepted, except ParsePolicy, which requires an explicit value.
const (
	// PolicyHead keeps the first lines; the marker is appended (stdout).
	PolicyHead Policy = "head"
	// PolicyTail keeps the last lines; the marker is prepended (stderr).
	PolicyTail Policy = "tail"
	// PolicyHeadTail keeps the first and last halves of the allowed lines
	// and bytes; the marker sits on its own line between them.
	PolicyHeadTail Policy = "head+tail"
)

// ParsePolicy returns the Policy named by s. An empty or unknown name is an
// error wrapping ErrInvalid that names the value and the allowed ones.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyHead, PolicyTail, PolicyHeadTail:
		return p, nil
	case "":
		return "", fmt.Errorf("%w: empty policy; allowed: %q, %q, %q", ErrInvalid, PolicyHead, PolicyTail, PolicyHeadTail)
	default:
		return "", fmt.Errorf("%w: unknown policy %q; allowed: %q, %q, %q", ErrInvalid, s, PolicyHead, PolicyTail, PolicyHeadTail)
	}
}

// Limits is a model-view budget. A zero or negative field means its default
// (DefaultMaxBytes, DefaultMaxLines); a positive MaxBytes below 4 counts as
// 4, so that one character of any size always fits.
type Limits struct {
	MaxBytes, MaxLines int
}

// norm returns l with defaults and floors applied.
func (l Limits) norm() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	l.MaxBytes = max(l.MaxBytes, minMaxBytes)
	if l.MaxLines <= 0 {
		l.MaxLines = DefaultMaxLines
	}
	return l
}

// Counts are one stream's counters from the capture layer (capture.Counts
// and ringtail.Counts map onto it). The zero Counts means "unknown": Shape
// then derives them from the data, as if the data were the whole stream.
type Counts struct {
	TotalBytes, TotalLines       int64
	CapturedBytes, CapturedLines int64
	OmittedBytes, OmittedLines   int64
	// EdgeLineBytes is the length of the whole stream's first line (head
	// policy) or last line (tail policy), newline excluded; 0 means unknown,
	// and Shape uses what the data shows.
	EdgeLineBytes int64
}

// Options configure Shape. The zero Options is a head cut under the default
// limits with clean-up on and no spill file.
type Options struct {
	// Policy selects the cut; "" means PolicyHead, and so does an unknown
	// value (validate user input with ParsePolicy).
	Policy Policy
	// Limits is the budget of the view; zero fields mean the defaults.
	Limits Limits
	// SpillPath, when non-empty, names the file holding the fuller copy;
	// the marker then carries the spill sentence.
	SpillPath string
	// SpillKept says which part of the stream the spill file holds when it
	// holds only part of it (the capture stopped at its ceiling, or the file
	// at the spill cap): the sentence then says "Output up to byte N of M
	// saved to <path>" instead of "Full output saved to <path>", which is
	// said only of a whole copy. The zero SpillKept means the whole stream.
	SpillKept SpillKept
	// Raw disables the model-view clean-up (ANSI strip, carriage-return
	// collapse, binary detection). Invalid UTF-8 and NUL bytes are replaced
	// with U+FFFD either way.
	Raw bool
}

// Info is the per-stream info of a Result (docs/wire.md, Result). Its JSON names are a
// public contract.
type Info struct {
	// Truncated is true when the view was cut or the capture layer omitted
	// part of the stream; the view carries a marker exactly then.
	Truncated bool `json:"truncated"`
	// TotalBytes and TotalLines count the whole stream.
	TotalBytes int64 `json:"totalBytes"`
	TotalLines int64 `json:"totalLines"`
	// KeptBytes and KeptLines describe the view text without the marker.
	KeptBytes int64 `json:"keptBytes"`
	KeptLines int64 `json:"keptLines"`
	// CapturedBytes is what the capture layer kept; OmittedBytes and
	// OmittedLines are what it did not keep.
	CapturedBytes int64 `json:"capturedBytes"`
	OmittedBytes  int64 `json:"omittedBytes"`
	OmittedLines  int64 `json:"omittedLines"`
	// SpillPath is the spill file named in the marker, or empty.
	SpillPath string `json:"spillPath"`
	// Binary is true when the view was replaced by the binary-output line.
	Binary bool `json:"binary,omitempty"`
	// EscapesRemoved counts ANSI escape sequences stripped from the lines
	// Shape examined.
	EscapesRemoved int64 `json:"escapesRemoved,omitempty"`
	// RedrawsCollapsed counts carriage-return overwrites collapsed.
	RedrawsCollapsed int64 `json:"redrawsCollapsed,omitempty"`
	// InvalidBytes counts bytes replaced with U+FFFD: invalid UTF-8, and
	// NUL bytes past the 4 KiB binary sniff.
	InvalidBytes int64 `json:"invalidBytes,omitempty"`
}
