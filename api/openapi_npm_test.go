package api_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sh/corral/internal/proctest"
)

// TestOpenAPIRedocly lints the document a live server serves with Redocly's
// CLI (the recommended-strict rules; info-license is skipped, the project
// names no license), and checks that the linter refuses a broken copy (a
// $ref to a schema that does not exist), so a pass means something.
func TestOpenAPIRedocly(t *testing.T) {
	proctest.Heavy(t)
	t.Parallel()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not found")
	}
	dir := t.TempDir()
	ictx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ictx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund",
		"--loglevel=error", "@redocly/cli@2").CombinedOutput(); err != nil {
		t.Skipf("npm install @redocly/cli failed (registry unavailable?): %v\n%s", err, out)
	}
	e := newEnv(t, withToken(testToken))
	code, doc := e.do(context.Background(), "GET", "/openapi.json", "", "Authorization", "")
	if code != 200 {
		t.Fatalf("GET /openapi.json: %d", code)
	}
	lint := func(name string, doc []byte) ([]byte, error) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "redocly"), "lint",
			"--extends=recommended-strict", "--skip-rule=info-license", "--format=stylish", path)
		cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
		return cmd.CombinedOutput()
	}
	if out, err := lint("openapi.json", doc); err != nil {
		t.Fatalf("redocly lint: %v\n%s", err, out)
	}
	broken := bytes.Replace(doc, []byte(`"#/components/schemas/Usage"`), []byte(`"#/components/schemas/NoSuchSchema"`), 1)
	if bytes.Equal(broken, doc) {
		t.Fatal("the document has no $ref to Usage to break")
	}
	if out, err := lint("broken.json", broken); err == nil {
		t.Errorf("redocly accepted a document with a dangling $ref:\n%s", out)
	}
}
