package envd_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestFilesRoutesShape: the /files routes and the routes corral does not
// serve answer in envd's error shape ({"message", "code"}), and never 404
// for a path that is not missing (the SDKs read a 404 as a missing file).
func TestFilesRoutesShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/files/compose", 501},                         // not served
		{"GET", "/envs", 501},                                   // not served
		{"GET", "/files?path=/etc/passwd", 403},                 // outside the root
		{"GET", "/files?path=../../etc/passwd", 403},            // outside the root
		{"GET", "/files?path=no-such-file-of-corral-test", 404}, // missing: the one 404
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, e.ts.URL+tc.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Message string
			Code    int
		}
		if resp.StatusCode != tc.want || json.Unmarshal(b, &body) != nil || body.Code != tc.want || body.Message == "" {
			t.Errorf("%s %s: %d %s, want %d in envd's shape", tc.method, tc.path, resp.StatusCode, b, tc.want)
		}
	}
}
