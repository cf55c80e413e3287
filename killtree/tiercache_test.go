package killtree

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTierCacheFormat: what formatTierCache writes parseTierCache reads
// back exactly, whatever the reasons hold, and a file that is cut, has
// another key, or is no such file is refused whole.
func TestTierCacheFormat(t *testing.T) {
	key := "killtree-tiers-2\nboot\n0\n0::/a b\n\ncorral\ntrue"
	st := []TierStatus{
		{Tier: TierCgroup2, Works: true, Reason: "leaves under /sys/fs/cgroup/corral; \"quoted\"\nsecond line \x00\xff é"},
		{Tier: TierPgroup, Works: false, Reason: ""},
		{Tier: "a tier with spaces", Works: true, Reason: " true \"x\" "},
	}
	b := formatTierCache(key, st)
	got := parseTierCache(b, key)
	if got == nil {
		t.Fatalf("parse of %q refused", b)
	}
	if d := cmp.Diff(st, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if parseTierCache(b, key+"x") != nil {
		t.Error("a file of another key was read")
	}
	for n := range len(b) {
		if st := parseTierCache(b[:n], key); st != nil {
			t.Errorf("the file cut to %d of %d bytes was read: %v", n, len(b), st)
		}
	}
	for _, bad := range []string{
		"",
		`{"key":"k","tiers":[{"Tier":"pgroup","Works":true}]}`, // the JSON form of killtree-tiers-1
		`"k"` + "\n\n", // no tier
		`"k"` + "\n" + `"pgroup" yes ""` + "\n\n",
		`"k"` + "\n" + `"pgroup" true ""` + "\nextra\n\n",
		`"k"` + "\n" + `"pgroup" true ""` + "\n\n\n",
		`"k"` + "\n" + `"pgroup" true "unterminated` + "\n\n",
		`"k"` + "\n" + `pgroup true ""` + "\n\n",
	} {
		if st := parseTierCache([]byte(bad), "k"); st != nil {
			t.Errorf("parse of %q: %v; want refused", bad, st)
		}
	}
}

// FuzzParseTierCache: parsing any bytes does not panic, reads only what
// ends with the blank line, and what it reads survives a format and parse
// unchanged.
func FuzzParseTierCache(f *testing.F) {
	f.Add(string(formatTierCache("k", []TierStatus{{Tier: TierPgroup, Works: true, Reason: "r"}})), "k")
	f.Add(`"k"`+"\n"+`"cgroup2" 1 "a\nb"`+"\n\n", "k")
	f.Fuzz(func(t *testing.T, text, key string) {
		st := parseTierCache([]byte(text), key)
		if st == nil {
			return
		}
		if !strings.HasSuffix(text, "\n\n") {
			t.Fatalf("read %q, which does not end with the blank line", text)
		}
		if again := parseTierCache(formatTierCache(key, st), key); !cmp.Equal(st, again) {
			t.Fatalf("format and parse of %v: %v", st, again)
		}
	})
}
