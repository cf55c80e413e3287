package budget

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets check Shape against a trivial reference model: in raw
// mode the whole view must equal the reference's, byte for byte; with
// clean-up on (whose reference would be Shape itself) the properties must
// hold: valid UTF-8, kept text within budget, marker present exactly when
// truncated, counts consistent with the view.

func FuzzShapeHead(f *testing.F)     { fuzzShape(f, PolicyHead) }
func FuzzShapeTail(f *testing.F)     { fuzzShape(f, PolicyTail) }
func FuzzShapeHeadTail(f *testing.F) { fuzzShape(f, PolicyHeadTail) }

// fuzzShape seeds f and runs the checks for policy p.
func fuzzShape(f *testing.F, p Policy) {
	seeds := []string{
		"", "a", "a\n", "a\nb\nc\n", "\n\n\n", numbered(1, 30),
		strings.Repeat("😀", 200), "é\nü\n日本\n" + strings.Repeat("😀", 50) + "\n",
		"a\xffb\xc3\n\xf0\x9f\x98", "\x9f\x98\x80tail\n", "10%\r20%\r30%\n", "a\r\nb\r\n",
		"\x1b[31mred\x1b[0m\n\x1b]0;t\x07x\n", "\x00\x01binary", strings.Repeat("long line ", 100) + "\nshort\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint16(i*37), uint8(i), i%2 == 0, i%3 == 0)
	}
	f.Fuzz(func(t *testing.T, data []byte, mb uint16, ml uint8, omitted, raw bool) {
		lim := Limits{MaxBytes: 4 + int(mb)%600, MaxLines: 1 + int(ml)%20}
		checkShape(t, data, lim, p, omitted, raw)
	})
}

// checkShape shapes data and checks the result.
func checkShape(t *testing.T, data []byte, lim Limits, p Policy, omitted, raw bool) {
	t.Helper()
	c := Counts{}
	if omitted {
		n := countLines(data)
		c = Counts{TotalBytes: int64(len(data)) + 7, TotalLines: n + 2, CapturedBytes: int64(len(data)), CapturedLines: n, OmittedBytes: 7, OmittedLines: 2}
	}
	o := Options{Policy: p, Limits: lim, Raw: raw, SpillPath: "/tmp/s.log"}
	view, info := Shape(data, c, o)
	if !utf8.ValidString(view) {
		t.Fatalf("view not valid UTF-8: %q", view)
	}
	if strings.IndexByte(view, 0) >= 0 {
		t.Fatalf("view holds a raw NUL: %q", view)
	}
	if info.Binary {
		if raw || !info.Truncated || !strings.HasPrefix(view, "[binary output: ") || strings.Contains(view, "\n") {
			t.Fatalf("binary view %q info %+v", view, info)
		}
		return
	}
	if info.KeptBytes > int64(lim.MaxBytes) || info.KeptLines > int64(lim.MaxLines) {
		t.Fatalf("kept %d bytes %d lines over %+v", info.KeptBytes, info.KeptLines, lim)
	}
	if len(data) > 0 && info.KeptBytes == 0 && (info.TotalLines > 0 && !omitted) && raw {
		t.Fatalf("empty payload for %q", data)
	}
	if raw {
		if want := refView(data, lim, p, omitted, c, o.SpillPath); view != want {
			t.Fatalf("view differs from the reference\n got %q\nwant %q", view, want)
		}
	}
	payload, mark := splitView(t, view, info)
	if (mark != "") != info.Truncated {
		t.Fatalf("marker %q but truncated=%v; view %q", mark, info.Truncated, view)
	}
	if omitted && !info.Truncated {
		t.Fatalf("capture omitted bytes but not truncated")
	}
	if len(mark) > MaxMarkerBytes {
		t.Fatalf("marker of %d bytes", len(mark))
	}
	if int64(len(payload)) != info.KeptBytes || lineCount(payload) != info.KeptLines {
		t.Fatalf("payload %q has %d bytes, info says %d bytes %d lines", payload, len(payload), info.KeptBytes, info.KeptLines)
	}
}

// lineCount counts the lines of a payload.
func lineCount(payload string) int64 { return countLines([]byte(payload)) }

// splitView separates the marker from the kept text. The layout is
// head [+ "\n" when head lacks one] + marker [+ "\n"] + tail, so the marker is
// a line starting with "[truncated: " and the kept bytes fix which one.
func splitView(t *testing.T, view string, info Info) (payload, mark string) {
	t.Helper()
	if !info.Truncated {
		return view, ""
	}
	for i := 0; i < len(view); i++ {
		if i > 0 && view[i-1] != '\n' || !strings.HasPrefix(view[i:], "[truncated: ") {
			continue
		}
		mark, tail, _ := strings.Cut(view[i:], "\n")
		head := view[:i]
		if !strings.HasSuffix(mark, "]") {
			continue
		}
		switch int64(len(head) + len(tail)) {
		case info.KeptBytes:
			return head + tail, mark
		case info.KeptBytes + 1:
			if h := head[:len(head)-1]; h != "" && !strings.HasSuffix(h, "\n") {
				return h + tail, mark
			}
		}
	}
	t.Fatalf("no marker line fits the layout of %q (info %+v)", view, info)
	return "", ""
}

// refView is the reference model of a raw-mode Shape.
func refView(data []byte, lim Limits, p Policy, omitted bool, c Counts, path string) string {
	if omitted {
		data = refTrim(data, p)
	}
	total := c.TotalLines
	if c == (Counts{}) {
		total = countLines(data)
	}
	lines := strings.SplitAfter(refRepair(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	sentence := " Full output saved to " + path + " — Grep it, or Read it with offset/limit."
	lm := fmt.Sprintf("limit %d lines / %s.", lim.MaxLines, refBytes(lim.MaxBytes))
	head := func(maxL, maxB int) []string {
		var kept []string
		size := 0
		for _, l := range lines {
			if len(kept) == maxL || size+len(l) > maxB {
				break
			}
			kept, size = append(kept, l), size+len(l)
		}
		return kept
	}
	tail := func(from []string, maxL, maxB int) []string {
		var kept []string
		size := 0
		for i := len(from) - 1; i >= 0; i-- {
			if len(kept) == maxL || size+len(from[i]) > maxB {
				break
			}
			kept, size = append([]string{from[i]}, kept...), size+len(from[i])
		}
		return kept
	}
	headView := func() string {
		kept := head(lim.MaxLines, lim.MaxBytes)
		if len(kept) == len(lines) && !omitted {
			return strings.Join(kept, "")
		}
		if len(kept) == 0 && len(lines) > 0 {
			line := strings.TrimSuffix(lines[0], "\n")
			pre := ""
			for _, r := range line {
				if len(pre)+utf8.RuneLen(r) > lim.MaxBytes {
					break
				}
				pre += string(r)
			}
			raw := bytes.IndexByte(data, '\n')
			if raw < 0 {
				raw = len(data)
			}
			return pre + fmt.Sprintf("\n[truncated: no complete line fits the %s limit; kept %d bytes of a single %d-byte line.%s]", refBytes(lim.MaxBytes), len(pre), raw, sentence)
		}
		s := strings.Join(kept, "")
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		return s + fmt.Sprintf("[truncated: kept the first %d of %d lines; %s%s]", len(kept), total, lm, sentence)
	}
	switch p {
	case PolicyTail:
		kept := tail(lines, lim.MaxLines, lim.MaxBytes)
		if len(kept) == len(lines) && !omitted {
			return strings.Join(kept, "")
		}
		if len(kept) == 0 && len(lines) > 0 {
			line := []rune(strings.TrimSuffix(lines[len(lines)-1], "\n"))
			suf := ""
			for i := len(line) - 1; i >= 0; i-- {
				if len(suf)+utf8.RuneLen(line[i]) > lim.MaxBytes {
					break
				}
				suf = string(line[i]) + suf
			}
			rawLines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
			return fmt.Sprintf("[truncated: no complete line fits the %s limit; kept %d bytes of a single %d-byte line.%s]\n", refBytes(lim.MaxBytes), len(suf), len(rawLines[len(rawLines)-1]), sentence) + suf
		}
		return fmt.Sprintf("[truncated: kept the last %d of %d lines; %s%s]\n", len(kept), total, lm, sentence) + strings.Join(kept, "")
	case PolicyHeadTail:
		if len(head(lim.MaxLines, lim.MaxBytes)) == len(lines) {
			return headView()
		}
		hl, hb := (lim.MaxLines+1)/2, lim.MaxBytes/2
		h := head(hl, hb)
		if len(h) == 0 || lim.MaxLines-hl == 0 {
			return headView()
		}
		tl := tail(lines[len(h):], lim.MaxLines-hl, lim.MaxBytes-hb)
		if len(tl) == 0 {
			return headView()
		}
		return strings.Join(h, "") + fmt.Sprintf("[truncated: kept the first %d and the last %d of %d lines; %s%s]\n", len(h), len(tl), total, lm, sentence) + strings.Join(tl, "")
	}
	return headView()
}

// refRepair replaces every byte outside a valid UTF-8 sequence with U+FFFD.
func refRepair(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 || r == 0 {
			sb.WriteString("\uFFFD")
		} else {
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

// refTrim drops a character split by the capture edge.
func refTrim(b []byte, p Policy) []byte {
	if p == PolicyTail {
		for k := 0; k < len(b) && k < 4; k++ {
			if utf8.RuneStart(b[k]) {
				return b[k:]
			}
		}
		return b
	}
	for k := 1; k <= 3 && k <= len(b); k++ {
		if x := b[len(b)-k]; utf8.RuneStart(x) {
			if x >= 0xc0 && !utf8.FullRune(b[len(b)-k:]) {
				return b[:len(b)-k]
			}
			return b
		}
	}
	return b
}

// refBytes renders a byte limit as the marker states it.
func refBytes(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dKB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}

// TestShapeAgainstReference runs the fuzz checks over generated inputs, so
// that plain `go test` exercises the reference model beyond the seeds.
func TestShapeAgainstReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "bc", "\n", "\n", "é", "😀", "日本", "\xff", "\r", "\x1b[1m", "word ", strings.Repeat("x", 40)}
	for i := range 3000 {
		var b strings.Builder
		for range rng.IntN(60) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		lim := Limits{MaxBytes: 4 + rng.IntN(120), MaxLines: 1 + rng.IntN(8)}
		for _, p := range []Policy{PolicyHead, PolicyTail, PolicyHeadTail} {
			checkShape(t, []byte(b.String()), lim, p, i%3 == 0, i%2 == 0)
		}
	}
}
