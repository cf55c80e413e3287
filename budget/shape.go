package budget

import (
	"bytes"
	"strings"

	"github.com/corral-sh/corral/internal/utf8cut"
)

// Shape turns retained bytes plus the stream's counters into the model view
// and its Info. data is the head of the stream for PolicyHead, its tail for
// PolicyTail; for PolicyHeadTail the caller passes the retained bytes and
// Shape keeps the first and the last halves of the allowed lines and bytes.
//
// Unless o.Raw is set the view is cleaned up first: ANSI escape sequences are
// stripped, carriage-return redraws collapsed, and data whose first 4 KiB
// hold a NUL byte or are more than 30% non-printable becomes the single line
// "[binary output: N bytes; saved to <path>]". The view is always valid
// UTF-8; no cut splits a character; the marker (spec §3) is present exactly
// when Info.Truncated is, lies outside the budget and is at most
// MaxMarkerBytes long. When not even one complete line fits, a
// character-safe prefix (head) or suffix (tail) of the edge line is kept,
// never an empty payload.
//
// Shape does not modify data. It is pure and safe for concurrent use.
func Shape(data []byte, c Counts, o Options) (string, Info) {
	lim := o.Limits.norm()
	if c == (Counts{}) {
		n := countLines(data)
		c = Counts{TotalBytes: int64(len(data)), TotalLines: n, CapturedBytes: int64(len(data)), CapturedLines: n}
	}
	info := Info{
		TotalBytes:    c.TotalBytes,
		TotalLines:    c.TotalLines,
		CapturedBytes: c.CapturedBytes,
		OmittedBytes:  c.OmittedBytes,
		OmittedLines:  c.OmittedLines,
		SpillPath:     o.SpillPath,
	}
	omitted := c.OmittedBytes > 0
	if o.Policy == PolicyTail {
		data = trimLeadingPartial(data, omitted)
	} else {
		data = trimTrailingPartial(data, omitted)
	}
	if !o.Raw && looksBinary(data) {
		info.Binary, info.Truncated = true, true
		return binaryLine(c.TotalBytes, o.SpillPath, o.SpillKept), info
	}

	var v view
	switch o.Policy {
	case PolicyTail:
		v = shapeTail(data, c, lim, o.Raw)
	case PolicyHeadTail:
		v = shapeHeadTail(data, c, lim, o.Raw)
	default:
		v = shapeHead(data, c, lim, o.Raw)
	}

	info.KeptBytes = int64(len(v.head) + len(v.tail))
	info.KeptLines = v.m.first + v.m.last
	info.EscapesRemoved, info.RedrawsCollapsed, info.InvalidBytes = v.cl.escapes, v.cl.redraws, v.cl.invalids
	info.Truncated = v.cut || omitted
	if !info.Truncated {
		return string(v.head) + string(v.tail), info
	}
	v.m.total, v.m.lim = c.TotalLines, lim
	return v.render(marker(v.m, o.SpillPath, o.SpillKept)), info
}

// view is a cut before rendering: the kept text at the head and at the tail
// (either may be empty), what the marker will state, and the clean-up counts.
type view struct {
	head, tail []byte
	cut        bool // lines or bytes of data were left out
	m          markerSpec
	cl         cleaner
}

// render joins the kept text and the marker: appended after the head (on its
// own line), prepended before the tail, or between the two.
func (v *view) render(mark string) string {
	var out strings.Builder
	out.Grow(len(v.head) + len(v.tail) + len(mark) + 2)
	out.Write(v.head)
	if len(v.head) > 0 && v.head[len(v.head)-1] != '\n' {
		out.WriteByte('\n')
	}
	out.WriteString(mark)
	if v.m.kind != markHead && v.m.kind != markSingle || len(v.tail) > 0 {
		out.WriteByte('\n')
	}
	out.Write(v.tail)
	return out.String()
}

// shapeHead keeps the first lines of data that fit lim.
func shapeHead(data []byte, c Counts, lim Limits, raw bool) view {
	v := view{cl: cleaner{raw: raw}, m: markerSpec{kind: markHead}}
	var n, pos int
	var pending []byte
	v.head, n, pos, pending = takeHead(nil, data, lim, &v.cl)
	v.m.first = int64(n)
	v.cut = pos < len(data)
	if n == 0 && v.cut {
		// Not even the first line fits: keep a character-safe prefix of it.
		v.head = pending[:utf8cut.Prefix(pending, lim.MaxBytes)]
		v.m = markerSpec{kind: markSingle, first: 1, keptBytes: int64(len(v.head)), lineBytes: edgeLen(c, firstLineLen(data))}
	}
	return v
}

// shapeTail keeps the last lines of data that fit lim.
func shapeTail(data []byte, c Counts, lim Limits, raw bool) view {
	v := view{cl: cleaner{raw: raw}, m: markerSpec{kind: markTail}}
	tail, n, pos, pending := takeTail(data, 0, lim, &v.cl)
	v.tail, v.m.last = tail, int64(n)
	v.cut = pos > 0
	if n == 0 && v.cut {
		// Not even the last line fits: keep a character-safe suffix of it.
		v.tail = pending[len(pending)-utf8cut.Suffix(pending, lim.MaxBytes):]
		v.m = markerSpec{kind: markSingle, last: 1, keptBytes: int64(len(v.tail)), lineBytes: edgeLen(c, lastLineLen(data))}
	}
	return v
}

// shapeHeadTail keeps the first and the last halves of what lim allows.
// When everything fits it keeps everything; when either half would hold no
// complete line it falls back to a head cut under the whole of lim.
func shapeHeadTail(data []byte, c Counts, lim Limits, raw bool) view {
	whole := shapeHead(data, c, lim, raw)
	if !whole.cut {
		return whole
	}
	headLim := Limits{MaxBytes: lim.MaxBytes / 2, MaxLines: (lim.MaxLines + 1) / 2}
	tailLim := Limits{MaxBytes: lim.MaxBytes - headLim.MaxBytes, MaxLines: lim.MaxLines - headLim.MaxLines}
	v := view{cl: cleaner{raw: raw}, cut: true, m: markerSpec{kind: markHeadTail}}
	head, hn, hpos, _ := takeHead(nil, data, headLim, &v.cl)
	if hn == 0 || tailLim.MaxLines == 0 {
		return whole
	}
	tail, tn, _, _ := takeTail(data, hpos, tailLim, &v.cl)
	if tn == 0 {
		return whole
	}
	v.head, v.tail, v.m.first, v.m.last = head, tail, int64(hn), int64(tn)
	return v
}

// takeHead appends to dst the cleaned lines from the start of data while
// they fit lim. It returns dst, the number of lines kept, the offset in data
// of the first line not kept, and that line's cleaned text (nil when all of
// data was kept).
func takeHead(dst, data []byte, lim Limits, cl *cleaner) ([]byte, int, int, []byte) {
	start, lines, pos := len(dst), 0, 0
	if dst == nil {
		dst = make([]byte, 0, min(lim.MaxBytes, len(data)))
	}
	for pos < len(data) && lines < lim.MaxLines {
		end, next, nl := len(data), len(data), 0
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end, next, nl = pos+i, pos+i+1, 1
		}
		ln := cl.line(data[pos:end])
		if len(ln)+nl == 0 {
			pos = next // a last line clean-up emptied is no line at all
			continue
		}
		if len(dst)-start+len(ln)+nl > lim.MaxBytes {
			return dst, lines, pos, ln
		}
		dst = append(dst, ln...)
		if nl == 1 {
			dst = append(dst, '\n')
		}
		lines, pos = lines+1, next
	}
	return dst, lines, pos, nil
}

// takeTail returns the cleaned lines from the end of data, down to offset
// stop (a line start), while they fit lim. It returns them, their number,
// the offset in data of the first line kept (or where it stopped), and the
// cleaned text of the last line that did not fit.
func takeTail(data []byte, stop int, lim Limits, cl *cleaner) ([]byte, int, int, []byte) {
	var parts []part
	size, end := 0, len(data)
	for end > stop && len(parts) < lim.MaxLines {
		nl := 0
		if data[end-1] == '\n' {
			nl = 1
		}
		begin := stop + bytes.LastIndexByte(data[stop:end-nl], '\n') + 1
		ln := cl.line(data[begin : end-nl])
		if len(ln)+nl == 0 {
			end = begin // a last line clean-up emptied is no line at all
			continue
		}
		if size+len(ln)+nl > lim.MaxBytes {
			return joinReversed(parts, size), len(parts), end, ln
		}
		parts = append(parts, part{ln, nl})
		size += len(ln) + nl
		end = begin
	}
	return joinReversed(parts, size), len(parts), end, nil
}

// part is one cleaned line collected by takeTail; nl is 1 when it ended
// with a newline.
type part struct {
	b  []byte
	nl int
}

// joinReversed joins parts, collected from the end backwards, in stream
// order; size is their total length.
func joinReversed(parts []part, size int) []byte {
	out := make([]byte, 0, size)
	for i := len(parts) - 1; i >= 0; i-- {
		out = append(out, parts[i].b...)
		if parts[i].nl == 1 {
			out = append(out, '\n')
		}
	}
	return out
}

// countLines counts the lines of b; a last line without a newline counts.
func countLines(b []byte) int64 {
	n := int64(bytes.Count(b, []byte{'\n'}))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// firstLineLen is the length of b's first line, newline excluded.
func firstLineLen(b []byte) int {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return i
	}
	return len(b)
}

// lastLineLen is the length of b's last line, newline excluded.
func lastLineLen(b []byte) int {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return len(b) - bytes.LastIndexByte(b, '\n') - 1
}

// edgeLen is the length of the stream's edge line: the capture layer's
// figure when it knows it, else what the data shows.
func edgeLen(c Counts, inData int) int64 {
	if c.EdgeLineBytes > 0 {
		return c.EdgeLineBytes
	}
	return int64(inData)
}

// trimTrailingPartial drops an incomplete character at the end of data when
// the capture layer cut the stream there (omitted is true): it is a
// character the capture ceiling split, not invalid output.
func trimTrailingPartial(data []byte, omitted bool) []byte {
	if !omitted {
		return data
	}
	return data[:utf8cut.Complete(data)]
}

// trimLeadingPartial drops the continuation bytes of a character split by
// the start of a retained tail (omitted is true).
func trimLeadingPartial(data []byte, omitted bool) []byte {
	if !omitted {
		return data
	}
	return data[utf8cut.Start(data):]
}
