package budget

import (
	"bytes"
	"strings"

	"github.com/corral-sh/corral/internal/lines"
	"github.com/corral-sh/corral/internal/utf8cut"
)

// Window cuts the next page of a stream that is still being read (a
// background job's output) to one budget: at most l.MaxLines lines and
// l.MaxBytes bytes (zero fields take the defaults), after the last complete
// line that fits, or at a character boundary when not even one line fits.
// Unless final (nothing more will come), an incomplete UTF-8 sequence at the
// end stays for the next page. It returns the text, with invalid bytes
// replaced by U+FFFD, and how many bytes of data it consumed: the next page
// starts at data[used:]. Pages joined give back the stream, repaired.
//
// Window does not modify data. It is pure and safe for concurrent use.
func Window(data []byte, l Limits, final bool) (text string, used int) {
	l = l.norm()
	cut := data[:min(len(data), l.MaxBytes)]
	cut = cut[:lines.AfterNewline(cut, int64(l.MaxLines))] // the line bound
	if len(cut) < len(data) {
		// Cut short: prefer the end of the last complete line.
		if k := bytes.LastIndexByte(cut, '\n'); k >= 0 {
			cut = cut[:k+1]
		}
		final = false
	}
	if !final {
		cut = cut[:utf8cut.Complete(cut)]
	}
	return strings.ToValidUTF8(string(cut), "\uFFFD"), len(cut)
}
