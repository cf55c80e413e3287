//go:build unix

package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvironRunAs: commands run as another user see its HOME, USER and
// LOGNAME instead of the supervisor's, unless the request says otherwise.
func TestEnvironRunAs(t *testing.T) {
	t.Setenv("HOME", "/root")
	t.Setenv("USER", "root")
	u := &runAs{name: "alice", home: "/home/alice"}
	tests := []struct {
		name  string
		env   map[string]string
		unset []string
		want  map[string]string // name -> value, "" for absent
	}{
		{"the user's values replace the supervisor's", nil, nil,
			map[string]string{"HOME": "/home/alice", "USER": "alice", "LOGNAME": "alice"}},
		{"the request's own value wins", map[string]string{"HOME": "/tmp/h"}, nil,
			map[string]string{"HOME": "/tmp/h", "USER": "alice"}},
		{"unset removes it", nil, []string{"USER"},
			map[string]string{"HOME": "/home/alice", "USER": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Supervisor{user: u}
			got := map[string]string{}
			for _, kv := range s.environ(validated{Request: Request{Env: tc.env, Unset: tc.unset}, user: s.user}, "run-1", nil) {
				k, v, _ := strings.Cut(kv, "=")
				if _, dup := got[k]; dup {
					t.Errorf("%s appears twice", k)
				}
				got[k] = v
			}
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}

// TestCanEnter checks the permission-bit walk that decides whether the
// run-as user may enter a directory: owner bits for the owner, group bits
// for a member of the group, other bits for everyone else, on every
// directory of the way (a symlink is followed to its target).
func TestCanEnter(t *testing.T) {
	root := t.TempDir()
	// The way to root must be open to "others" for the rows below.
	for d := root; d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Skipf("cannot open %s to others: %v", d, err)
			}
		}
	}
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(root, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open, closed, groupOnly, ownerOnly := mk("open", 0o711), mk("closed", 0o770), mk("group", 0o710), mk("owner", 0o700)
	inClosed := filepath.Join(closed, "sub")
	if err := os.Mkdir(inClosed, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(closed, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o755)

	me, myGroup := uint32(os.Geteuid()), uint32(os.Getegid())
	other := &runAs{uid: me + 1000, gid: myGroup + 1000}
	member := &runAs{uid: me + 1000, gid: myGroup + 1000, groups: []uint32{myGroup}}
	owner := &runAs{uid: me, gid: myGroup + 1000}
	tests := []struct {
		name string
		u    *runAs
		dir  string
		want bool
	}{
		{"others may search 0711", other, open, true},
		{"others may not search 0770", other, closed, false},
		{"nor anything beneath it", other, inClosed, false},
		{"nor through a symlink to it", other, link, false},
		{"a supplementary group member may search 0710", member, groupOnly, true},
		{"a non-member may not", other, groupOnly, false},
		{"the owner uses the owner bits", owner, ownerOnly, true},
		{"the owner bits decide even when others may", &runAs{uid: me}, mk("notowner", 0o011), false},
		{"a file is not a directory", other, file, false},
		{"a missing directory", other, filepath.Join(root, "missing"), false},
	}
	for _, tc := range tests {
		if got := tc.u.canEnter(tc.dir); got != tc.want {
			t.Errorf("%s: canEnter(%s) = %v, want %v", tc.name, tc.dir, got, tc.want)
		}
	}
}
