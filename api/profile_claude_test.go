package api_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/supervisor"
)

func withProfile(p string) option {
	return func(c *api.Config, _ *supervisor.Config) { c.MCPTools = p }
}

// TestProfileSchemas: each profile serves exactly the tool list of
// testdata/profiles/PROFILE/tools.json (the harness's names, descriptions
// and argument schemas; SOURCE.md beside it cites them and says what
// differs) on the faces with MCP sessions, and that of
// tools-sessionless.json, where there is one, on the face without.
func TestProfileSchemas(t *testing.T) {
	t.Parallel()
	for _, p := range []string{api.ProfileClaudeCode, api.ProfileCodex, api.ProfileOpenHands} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withProfile(p))
			for _, f := range []struct {
				face, file string
				cs         *mcp.ClientSession
			}{
				{"stdio", "tools.json", inMemoryMCP(t, e)},
				{"http", "tools.json", httpClientSession(t, e, "2025-11-25")},
				{"sessionless", "tools-sessionless.json", httpClientSession(t, e, "2026-07-28")},
			} {
				path := "testdata/profiles/" + p + "/" + f.file
				if _, err := os.Stat(path); err != nil && !*updateProfiles {
					path = "testdata/profiles/" + p + "/tools.json"
				}
				tools, err := f.cs.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				var got []map[string]any
				for _, tool := range tools.Tools {
					raw, _ := json.Marshal(map[string]any{"name": tool.Name, "description": tool.Description, "inputSchema": tool.InputSchema})
					var m map[string]any
					json.Unmarshal(raw, &m)
					got = append(got, m)
				}
				if *updateProfiles && f.face != "http" {
					out, _ := json.MarshalIndent(got, "", "  ")
					os.WriteFile(path, append(out, '\n'), 0o644)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				var want []map[string]any
				if err := json.Unmarshal(b, &want); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: served tools differ from %s (-want +got):\n%s", f.face, path, diff)
				}
			}
		})
	}
}

// updateProfiles rewrites the profiles' tools.json from what is served;
// the diff is then read against the harness's source (SOURCE.md).
var updateProfiles = flag.Bool("update-profiles", false, "rewrite testdata/profiles/*/tools.json")

// TestProfileClaudeCalls drives the profile as Claude Code calls it: Bash
// with a timeout in milliseconds, Bash in the background, BashOutput with a
// filter over both streams, KillShell; a timeout over 600000 ms, another
// session's shell and a killed shell are refused in Claude Code's words.
func TestProfileClaudeCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withProfile(api.ProfileClaudeCode))
	call := mcpTextCaller(t, e, "2025-11-25")
	other := mcpTextCaller(t, e, "2025-11-25")

	text, isErr := call(api.ToolClaudeBash, map[string]any{"command": "echo out; echo err >&2; exit 3", "timeout": 5000, "description": "Print two lines"})
	if isErr || !strings.HasPrefix(text, "out\nerr\n[exit code 3 after ") {
		t.Errorf("Bash: %q", text)
	}
	// The server's maximum (300 s here) bounds Claude Code's 600000 ms:
	// over it is refused, saying the bound.
	for _, ms := range []float64{300001, 600000, 600001} {
		if text, isErr := call(api.ToolClaudeBash, map[string]any{"command": "true", "timeout": ms}); !isErr || !strings.Contains(text, "timeout is in milliseconds, from 1 to 300000 on this server") {
			t.Errorf("timeout %v: %q", ms, text)
		}
	}
	if text, isErr := call(api.ToolClaudeBash, map[string]any{"command": "true", "timeout": 300000}); isErr {
		t.Errorf("timeout 300000: %q", text)
	}
	text, _ = call(api.ToolClaudeBash, map[string]any{"command": "echo Ready; echo noise; echo READY >&2; sleep 30", "run_in_background": true})
	m := regexp.MustCompile(`^Command running in background with ID: (j-[0-9a-f]+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("background: %q", text)
	}
	id := m[1]
	// Wait until the lines are written: a read at offset 0 leaves the
	// cursor BashOutput reads from where it is.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if out, err := e.sup.Jobs().Output(context.Background(), id, supervisor.Stderr, 0, time.Second); err == nil && out.Data != "" {
			break
		}
	}
	text, _ = call(api.ToolClaudeBashOutput, map[string]any{"bash_id": id, "filter": "ready"})
	if !regexp.MustCompile(`(?s)^<status>running</status>\n\n<stdout>\nReady\n</stdout>\n\n<stderr>\nREADY\n</stderr>\n\n<timestamp>\d{4}-\d\d-\d\dT[0-9:.]+Z</timestamp>$`).MatchString(text) {
		t.Errorf("BashOutput: %q", text)
	}
	if text, isErr := other(api.ToolClaudeBashOutput, map[string]any{"bash_id": id}); !isErr || !strings.Contains(text, "No shell found with ID: "+id) {
		t.Errorf("another session's BashOutput: %q", text)
	}
	text, isErr = call(api.ToolClaudeKillShell, map[string]any{"shell_id": id})
	if want := `{"message":"Successfully killed shell: ` + id + ` (echo Ready; echo noise; echo READY >&2; sleep 30)","shell_id":"` + id + `"}`; isErr || text != want {
		t.Errorf("KillShell: %q, want %q", text, want)
	}
	if text, isErr := call(api.ToolClaudeKillShell, map[string]any{"shell_id": id}); !isErr || !strings.Contains(text, "is not running, so cannot be killed (status: killed)") {
		t.Errorf("KillShell of a killed shell: %q", text)
	}
	if text, _ := call(api.ToolClaudeBashOutput, map[string]any{"bash_id": id}); !strings.HasPrefix(text, "<status>killed</status>") {
		t.Errorf("BashOutput after the kill: %q", text)
	}
}

// TestProfileRefused: an unknown profile is refused saying so.
func TestProfileRefused(t *testing.T) {
	t.Parallel()
	sup, err := supervisor.New(supervisor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	for p, want := range map[string]string{"vim": "unknown tool profile"} {
		if _, err := api.New(api.Config{Supervisor: sup, MCPTools: p}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", p, err)
		}
	}
}
