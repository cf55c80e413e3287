package envd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corral-sh/corral/supervisor"
)

func TestSessionOfTag(t *testing.T) {
	for _, tc := range []struct {
		tag, want string
	}{
		{"", ""},                            // no tag: the default session
		{"start-cmd", "start-cmd"},          // a valid session name is the session
		{"..", "envd-"},                     // not a valid name: hashed
		{"my tag/with slash", "envd-"},      // not a valid name: hashed
		{strings.Repeat("a", 129), "envd-"}, // too long: hashed
	} {
		got := session(tc.tag)
		if tc.want == "envd-" {
			if !strings.HasPrefix(got, "envd-") || len(got) != len("envd-")+16 || got == session(tc.tag+"x") {
				t.Errorf("session(%q) = %q, want envd- and 16 hex digits of its hash", tc.tag, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("session(%q) = %q, want %q", tc.tag, got, tc.want)
		}
	}
}

// The table forgets the processes whose jobs the supervisor forgot, and
// stays within twice what it retains.
func TestTablePrunes(t *testing.T) {
	sup, err := supervisor.New(supervisor.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	var tb table
	tb.init()
	for i := range 1000 {
		tb.add(sup, &process{id: fmt.Sprintf("j-gone-%d", i), pid: uint32(i + 1)})
		if n := len(tb.byPid); n > minPrune {
			t.Fatalf("after %d adds of forgotten jobs the table holds %d, want at most %d", i+1, n, minPrune)
		}
	}
}

// TestConnectCodes: every class of supervisor error has its Connect code,
// and a closed supervisor reads as envd's unavailable with one sentence.
func TestConnectCodes(t *testing.T) {
	for c := supervisor.ClassInternal; c <= supervisor.ClassDeadline; c++ {
		if _, ok := connectCodes[c]; !ok {
			t.Errorf("class %d has no Connect code", c)
		}
	}
	err := toConnect(fmt.Errorf("start: %w", supervisor.ErrClosed))
	if got := err.Error(); got != "unavailable: corral is shutting down" {
		t.Errorf("closed: %q", got)
	}
}
