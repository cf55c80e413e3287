package sandboxd_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-sh/corral/api/sandboxd"
)

func newREST(t *testing.T, svc *sandboxd.Service) string {
	ts := httptest.NewServer(svc.RESTHandler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// call makes one request and returns the status and the body.
func call(t *testing.T, method, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600)
	os.Symlink(outside, filepath.Join(e.root, "out"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(e.root, "secret-link"))
	f := e.rest + "/v1/files/"

	// Write (parents made), read back, list, mode.
	if code, body := call(t, "PUT", f+"src/a/main.py?mode=0755", "print(1)\n"); code != 204 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := call(t, "GET", f+"src/a/main.py", ""); code != 200 || body != "print(1)\n" {
		t.Errorf("GET: %d %q", code, body)
	}
	if fi, err := os.Stat(filepath.Join(e.root, "src/a/main.py")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v %v, want 0755", fi.Mode(), err)
	}
	code, body := call(t, "GET", f+"src/a", "")
	var l struct {
		Path    string `json:"path"`
		Entries []struct {
			Name, Type, Mode string
			Size             int64
		} `json:"entries"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &l) != nil || l.Path != "/src/a" || len(l.Entries) != 1 ||
		l.Entries[0].Name != "main.py" || l.Entries[0].Type != "file" || l.Entries[0].Size != 9 || l.Entries[0].Mode != "0755" {
		t.Errorf("list: %d %s", code, body)
	}
	// The root's listing leaves out the links that lead outside.
	code, body = call(t, "GET", f, "")
	if code != 200 || strings.Contains(body, "out") || strings.Contains(body, "secret") || !strings.Contains(body, `"src"`) {
		t.Errorf("root list: %d %s", code, body)
	}
	// Nothing leaves the root: .., an encoded .., symlinks out (to read, to
	// write through, to list).
	for _, tc := range []struct{ method, path string }{
		{"GET", "..%2F..%2Fetc%2Fpasswd"},
		{"GET", "%2E%2E/x"},
		{"GET", "secret-link"},
		{"GET", "out/secret"},
		{"GET", "out"},
		{"PUT", "out/planted"},
		{"DELETE", "out/secret"},
	} {
		code, body := call(t, tc.method, f+tc.path, "x")
		if code != 403 || !strings.Contains(body, `"code":"PERMISSION_DENIED"`) {
			t.Errorf("%s %s: %d %s, want 403 PERMISSION_DENIED", tc.method, tc.path, code, body)
		}
	}
	// A PUT to a link replaces the link itself, inside the root.
	if code, body := call(t, "PUT", f+"secret-link", "new"); code != 204 {
		t.Errorf("PUT over a link: %d %s", code, body)
	}
	if fi, err := os.Lstat(filepath.Join(e.root, "secret-link")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link was not replaced by a file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("the file outside changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a file was planted outside the root")
	}
	// Delete: 409 on a non-empty directory, then recursive; 404 after.
	if code, _ := call(t, "DELETE", f+"src", ""); code != 409 {
		t.Errorf("DELETE non-empty: %d, want 409", code)
	}
	if code, _ := call(t, "DELETE", f+"src?recursive=true", ""); code != 204 {
		t.Errorf("DELETE recursive: %d, want 204", code)
	}
	if code, body := call(t, "GET", f+"src", ""); code != 404 || !strings.Contains(body, `"code":"NOT_FOUND"`) {
		t.Errorf("GET removed: %d %s", code, body)
	}
	if code, _ := call(t, "PUT", f+"x?mode=777", ""); code != 400 {
		t.Errorf("bad mode: %d, want 400", code)
	}
}

func TestHealthMetadataAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "tok")
	code, body := call(t, "GET", e.rest+"/v1/health", "")
	if code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("health: %d %s", code, body)
	}
	if code, _ := call(t, "GET", e.rest+"/v1/metadata", ""); code != 401 {
		t.Errorf("metadata without the token: %d, want 401", code)
	}
	code, body = call(t, "GET", e.rest+"/v1/metadata", "", "Authorization", "Bearer tok")
	var m struct{ Env map[string]string }
	if code != 200 || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("metadata: %d %s", code, body)
	}
	if diff := cmp.Diff(map[string]string{"SANDBOX_ID": "s-1"}, m.Env); diff != "" {
		t.Errorf("metadata env (-want +got; a credential-like name is withheld):\n%s", diff)
	}
	e.svc.SetReady(false)
	if code, _ := call(t, "GET", e.rest+"/v1/health", ""); code != 503 {
		t.Errorf("health while shutting down: %d, want 503", code)
	}
}
