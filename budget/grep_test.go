package budget

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGrepHeadLimit(t *testing.T) {
	t.Parallel()
	file := func(matches int) string {
		var b strings.Builder
		for i := 1; i <= matches; i++ {
			fmt.Fprintf(&b, "noise %d\nERROR %d\n", i, i)
		}
		return b.String()
	}
	re := regexp.MustCompile(`^ERROR`)
	tests := []struct {
		name          string
		file          string
		o             GrepOptions
		wantCount     int
		wantTruncated bool
		wantNotice    string
	}{
		// More matches than the default head limit: stop at 200.
		{"default limit", file(300), GrepOptions{}, 200, true, "Stopped at headLimit=200 matches; narrow the pattern or raise headLimit to see more."},
		// Exactly the limit: nothing left out.
		{"exact", file(200), GrepOptions{}, 200, false, ""},
		// A caller's head limit.
		{"custom", file(10), GrepOptions{HeadLimit: 3}, 3, true, "Stopped at headLimit=3 matches; narrow the pattern or raise headLimit to see more."},
		// No match.
		{"none", "a\nb\n", GrepOptions{}, 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Grep(strings.NewReader(tt.file), "log", re, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Count != tt.wantCount || len(res.Matches) != tt.wantCount || res.Truncated != tt.wantTruncated || res.Notice != tt.wantNotice {
				t.Fatalf("count %d truncated %v notice %q", res.Count, res.Truncated, res.Notice)
			}
			for i, m := range res.Matches {
				if want := (GrepMatch{Path: "log", Line: 2 * (i + 1), Text: fmt.Sprintf("ERROR %d", i+1)}); m != want {
					t.Fatalf("match %d = %+v, want %+v", i, m, want)
				}
			}
			if wantFiles := min(tt.wantCount, 1); res.Files != wantFiles || res.Matches == nil {
				t.Fatalf("files %d, matches nil: %v", res.Files, res.Matches == nil)
			}
		})
	}
}

func TestGrepClipsAndSkipsBinary(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ü", 2500) + " needle"
	res, err := Grep(strings.NewReader("x\n"+long+"\n"), "f", regexp.MustCompile("needle"), GrepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := GrepResult{Matches: []GrepMatch{{Path: "f", Line: 2, Text: strings.Repeat("ü", 2000)}}, Count: 1, Files: 1,
		Notice: "1 matched line clipped at 2000 characters."}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	for _, tt := range []struct{ path, file string }{{"a.log", "needle\x00"}, {"a.zip", "needle\n"}} {
		res, err := Grep(strings.NewReader(tt.file), tt.path, regexp.MustCompile("needle"), GrepOptions{})
		if err != nil || res.Count != 0 || res.Matches == nil || res.Truncated {
			t.Errorf("%s: binary not skipped silently: %+v, %v", tt.path, res, err)
		}
	}

	for _, tt := range []struct {
		re *regexp.Regexp
		o  GrepOptions
	}{{nil, GrepOptions{}}, {regexp.MustCompile("x"), GrepOptions{HeadLimit: -1}}} {
		if _, err := Grep(strings.NewReader("x"), "f", tt.re, tt.o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", tt, err)
		}
	}
}
