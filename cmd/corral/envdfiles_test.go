package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestEnvdE2BFiles drives `corral serve --envd --root-dir` with the E2B
// JavaScript SDK's sbx.files (npm e2b 2.x, debug mode): write, read, exists,
// makeDir, list, rename, getInfo, remove, and paths out of the root (a
// symlink, .., an absolute path) refused without a file planted or read;
// watch answers that it is not served. It skips as TestEnvdE2BSDK does.
func TestEnvdE2BFiles(t *testing.T) {
	t.Parallel()
	proctest.Heavy(t) // installs an npm SDK, as TestEnvdE2BSDK
	if testing.Short() {
		t.Skip("installs the e2b SDK with npm")
	}
	node, dir := e2bSDK(t)
	script, err := os.ReadFile(filepath.Join("testdata", "e2b_files.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600)
	os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o600)
	os.Symlink(outside, filepath.Join(root, "out"))
	s := startServe(t, []string{"CORRAL_TOKEN="}, "--listen", "127.0.0.1:0", "--envd", "127.0.0.1:0", "--root-dir", root)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, filepath.Join(dir, "files.mjs"), "http://"+s.envdAddr(), root).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	refused := func(name string) {
		m, _ := got[name].(map[string]any)
		msg, _ := m["message"].(string)
		if m["error"] == nil || m["error"] == "FileNotFoundError" || !strings.Contains(msg, "outside the sandbox root") {
			t.Errorf("%s: %v, want an error saying the path is outside the root (not FileNotFoundError)", name, got[name])
		}
		delete(got, name)
	}
	for _, n := range []string{"readLinkOut", "readDotDot", "writeOutside", "getInfoLinkOut"} {
		refused(n)
	}
	if w, _ := got["watch"].(map[string]any); w["error"] == nil || !strings.Contains(w["message"].(string), "not served") {
		t.Errorf("watch: %v, want an error saying it is not served", got["watch"])
	}
	delete(got, "watch")
	want := map[string]any{
		"write":         map[string]any{"name": "a.txt", "path": root + "/dir/a.txt"},
		"read":          "hello files\n",
		"readBytes":     12.0,
		"exists":        true,
		"existsMissing": false,
		"makeDir":       true,
		"makeDirAgain":  false,
		"list": []any{
			map[string]any{"name": "a.txt", "type": "file", "path": root + "/dir/a.txt"},
			map[string]any{"name": "sub", "type": "dir", "path": root + "/dir/sub"},
		},
		"listDeep":      []any{"a.txt", "sub", "deeper"},
		"rename":        map[string]any{"name": "b.txt", "path": root + "/dir/sub/b.txt"},
		"readRenamed":   "hello files\n",
		"getInfo":       map[string]any{"name": "b.txt", "type": "file", "size": 12.0, "permissions": "-rw-r--r--"},
		"remove":        "ok",
		"existsRemoved": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sbx.files (-want +got):\n%s", diff)
	}
	if _, err := os.Stat("/etc/corral-e2b-planted"); err == nil {
		t.Error("a file was planted outside the root")
	}
}
