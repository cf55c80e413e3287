package api

import (
	"fmt"
	"strings"
)

// Tool profiles: the tool shapes the MCP servers serve (docs/profiles.md).
const (
	// ProfileCorral is corral's own tools: bash, job_*, read_output,
	// grep_output, history.
	ProfileCorral = "corral"
	// ProfileClaudeCode is Claude Code's Bash, BashOutput and KillShell.
	ProfileClaudeCode = "claude-code"
	// ProfileCodex is Codex's exec_command and write_stdin.
	ProfileCodex = "codex"
	// ProfileOpenHands is OpenHands' execute_bash.
	ProfileOpenHands = "openhands"
)

// Profiles lists the tool profiles this build serves.
var Profiles = []string{ProfileCorral, ProfileClaudeCode, ProfileCodex, ProfileOpenHands}

// plannedProfiles are profiles of DESIGN's list that are not built yet;
// asking for one gets an error that says so rather than a half profile.
var plannedProfiles []string

// checkProfile refuses a profile this build does not serve.
func checkProfile(p string) error {
	for _, q := range Profiles {
		if p == q {
			return nil
		}
	}
	for _, q := range plannedProfiles {
		if p == q {
			return fmt.Errorf("api: the %s tool profile is not built yet; this build serves %s", p, strings.Join(Profiles, ", "))
		}
	}
	return fmt.Errorf("api: unknown tool profile %q; this build serves %s", p, strings.Join(Profiles, ", "))
}
