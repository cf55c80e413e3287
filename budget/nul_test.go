package budget

import (
	"regexp"
	"strings"
	"testing"
)

// pastSniff is text longer than the 4 KiB binary sniff, so what follows it
// is not seen by binary detection.
var pastSniff = strings.Repeat("plain text line\n", 300) // 4,800 bytes

func TestShapeNULPastSniff(t *testing.T) {
	t.Parallel()
	data := []byte(pastSniff + "a\x00b\n" + "c\x00\x00\n")
	for _, raw := range []bool{false, true} {
		view, info := Shape(data, Counts{}, Options{Raw: raw})
		if info.Binary {
			t.Fatalf("raw=%v: a NUL past 4 KiB made the view binary", raw)
		}
		if strings.IndexByte(view, 0) >= 0 {
			t.Fatalf("raw=%v: a raw NUL reached the view", raw)
		}
		if !strings.HasSuffix(view, "a\uFFFDb\nc\uFFFD\uFFFD\n") || info.InvalidBytes != 3 {
			t.Errorf("raw=%v: view ends %q, invalidBytes %d; want the NULs as U+FFFD, 3", raw, view[len(view)-20:], info.InvalidBytes)
		}
	}
	// Inside the sniff a NUL still makes the view binary (spec §6 rule 3).
	if _, info := Shape([]byte("a\x00b\n"+pastSniff), Counts{}, Options{}); !info.Binary {
		t.Error("a NUL in the first 4 KiB did not make the view binary")
	}
}

func TestReadGrepNULPastSniff(t *testing.T) {
	t.Parallel()
	file := pastSniff + "needle\x00here\n"
	res, err := Read(strings.NewReader(file), "x.log", int64(len(file)), ReadOptions{Offset: 301})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "needle\uFFFDhere\n" || !strings.Contains(res.Notice, "1 NUL byte replaced with U+FFFD.") {
		t.Errorf("read = %q, notice %q; want the NUL as U+FFFD and counted", res.Content, res.Notice)
	}
	g, err := Grep(strings.NewReader(file), "x.log", regexp.MustCompile("needle"), GrepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Count != 1 || g.Matches[0].Text != "needle\uFFFDhere" || g.Matches[0].Line != 301 {
		t.Errorf("grep = %+v; want line 301 with the NUL as U+FFFD", g)
	}
}
