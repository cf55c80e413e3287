package budget

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nextOffset extracts N from the notice's "Use offset=N to continue.".
func nextOffset(t *testing.T, notice string) int {
	t.Helper()
	m := regexp.MustCompile(`Use offset=(\d+) to continue\.`).FindStringSubmatch(notice)
	if m == nil {
		t.Fatalf("notice names no next offset: %q", notice)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestReadPaginatesMultiMegabyteFile(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	const lines = 120000
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&b, "%06d the quick brown fox jumps over the lazy dög\n", i)
	}
	file := b.String() // about 6 MB
	var got strings.Builder
	offset, calls := 1, 0
	for {
		res, err := Read(strings.NewReader(file), "out.log", int64(len(file)), ReadOptions{Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if res.Offset != offset || res.LineCount > SearchMaxLines || len(res.Content) > SearchMaxBytes || res.FileBytes != int64(len(file)) {
			t.Fatalf("window at %d: offset %d, %d lines, %d bytes", offset, res.Offset, res.LineCount, len(res.Content))
		}
		got.WriteString(res.Content)
		if res.TotalLines != nil {
			if *res.TotalLines != lines || res.Truncated || res.Notice != "" {
				t.Fatalf("last window: total %d truncated %v notice %q", *res.TotalLines, res.Truncated, res.Notice)
			}
			break
		}
		if !res.Truncated {
			t.Fatalf("window at %d stops early without truncated", offset)
		}
		next := nextOffset(t, res.Notice)
		if next != offset+res.LineCount {
			t.Fatalf("notice names offset=%d after %d lines from %d", next, res.LineCount, offset)
		}
		offset = next
	}
	if got.String() != file {
		t.Fatalf("paginated content differs from the file")
	}
	if calls < lines/SearchMaxLines {
		t.Fatalf("only %d calls", calls)
	}
}

func TestReadWindows(t *testing.T) {
	t.Parallel()
	kilo := strings.Repeat("k", 999) + "\n"
	total := func(n int) *int { return &n }
	tests := []struct {
		name string
		file string
		o    ReadOptions
		want ReadResult
	}{
		// The first window of a long file names the next call literally.
		{"limit", numbered(1, 2500), ReadOptions{},
			ReadResult{Path: "f", Content: numbered(1, 2000), Offset: 1, LineCount: 2000, Truncated: true,
				Notice: "Showing lines 1-2000; stopped at limit=2000. Use offset=2001 to continue."}},
		// The window that reaches the end reports totalLines and no notice.
		{"last window", numbered(1, 2500), ReadOptions{Offset: 2001},
			ReadResult{Path: "f", Content: numbered(2001, 500), Offset: 2001, LineCount: 500, TotalLines: total(2500)}},
		// Exactly limit lines: the end is detected, nothing is truncated.
		{"exact", numbered(1, 5), ReadOptions{Limit: 5},
			ReadResult{Path: "f", Content: numbered(1, 5), Offset: 1, LineCount: 5, TotalLines: total(5)}},
		// The 48 KiB budget stops the window at a line boundary.
		{"budget", strings.Repeat(kilo, 100), ReadOptions{},
			ReadResult{Path: "f", Content: strings.Repeat(kilo, 49), Offset: 1, LineCount: 49, Truncated: true,
				Notice: "Showing lines 1-49; stopped at the 48KB read budget. Use offset=50 to continue."}},
		// A long line is clipped at MaxLineChars characters and counted.
		{"clip", "a\n" + strings.Repeat("é", 3000) + "\nb", ReadOptions{},
			ReadResult{Path: "f", Content: "a\n" + strings.Repeat("é", 2000) + "\nb", Offset: 1, LineCount: 3, TotalLines: total(3), Truncated: true,
				Notice: "1 line clipped at 2000 characters."}},
		// Invalid UTF-8 becomes U+FFFD and is counted; CRLF stays byte-faithful.
		{"invalid", "a\xffb\r\nc\r\n", ReadOptions{},
			ReadResult{Path: "f", Content: "a\uFFFDb\r\nc\r\n", Offset: 1, LineCount: 2, TotalLines: total(2),
				Notice: "1 invalid UTF-8 byte replaced with U+FFFD."}},
		// An offset past the end is not an error.
		{"past end", "a\nb\n", ReadOptions{Offset: 10},
			ReadResult{Path: "f", Offset: 10, TotalLines: total(2), Notice: "offset=10 is past the end of the file (2 lines)."}},
		// A first line over a tiny budget still shows, clipped.
		{"tiny budget", "abcdef\ng\n", ReadOptions{MaxBytes: 4},
			ReadResult{Path: "f", Content: "abcd", Offset: 1, LineCount: 1, Truncated: true,
				Notice: "Showing lines 1-1; stopped at the 4B read budget. Use offset=2 to continue. Line 1 was clipped to the 4B read budget."}},
		// An empty file.
		{"empty", "", ReadOptions{},
			ReadResult{Path: "f", Offset: 1, TotalLines: total(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.want.FileBytes = int64(len(tt.file))
			got, err := Read(strings.NewReader(tt.file), "f", int64(len(tt.file)), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// giantLine yields n bytes of 'g' and then "\nend\n", never holding them.
type giantLine struct{ n int }

func (g *giantLine) Read(p []byte) (int, error) {
	if g.n <= 0 {
		return 0, io.EOF
	}
	if g.n <= 5 {
		c := copy(p, "\nend\n"[5-g.n:])
		g.n -= c
		return c, nil
	}
	c := min(len(p), g.n-5)
	for i := range c {
		p[i] = 'g'
	}
	g.n -= c
	return c, nil
}

func TestReadGiantLine(t *testing.T) {
	t.Parallel()
	res, err := Read(&giantLine{n: 64<<20 + 5}, "big.txt", -1, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("g", 2000) + "\nend\n"; res.Content != want || res.LineCount != 2 || *res.TotalLines != 2 || res.FileBytes != 64<<20+5 {
		t.Fatalf("got %d bytes content, %d lines, fileBytes %d", len(res.Content), res.LineCount, res.FileBytes)
	}
}

func TestReadRefusesBinary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, file string
	}{
		// A NUL byte in the first 4 KiB.
		{"nul", "out.log", "text\x00more"},
		// Mostly control bytes.
		{"controls", "out.log", strings.Repeat("\x01\x02\x03x", 100)},
		// A known binary extension, whatever the content.
		{"extension", "image.PNG", "looks like text\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(strings.NewReader(tt.file), tt.path, int64(len(tt.file)), ReadOptions{})
			if !errors.Is(err, ErrBinary) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("err = %v, want ErrBinary naming %s", err, tt.path)
			}
		})
	}
}

func TestReadInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []ReadOptions{{Offset: -1}, {Limit: -1}, {MaxBytes: -5}, {MaxLineChars: -1}} {
		if _, err := Read(strings.NewReader("x"), "f", 1, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", o, err)
		}
	}
}

// failingReader returns its error after the data.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestReadAndGrepWrapReadErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	if _, err := Read(failingReader{boom}, "f", 0, ReadOptions{}); !errors.Is(err, boom) {
		t.Errorf("Read err = %v", err)
	}
	if _, err := Grep(failingReader{boom}, "f", regexp.MustCompile("x"), GrepOptions{}); !errors.Is(err, boom) {
		t.Errorf("Grep err = %v", err)
	}
}
