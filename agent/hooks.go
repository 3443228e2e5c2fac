package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
)

// Where hook files go under the repo's .orch/ directory.
const (
	ClaudeSettingsFile = "claude-settings.json" // passed to claude with --settings
)

// ClaudeHookEvents are the Claude Code hook events orch installs, each
// calling orch-notify hook claude with the hook's JSON on stdin.
var ClaudeHookEvents = []string{"Notification", "PermissionRequest", "PreCompact", "SessionStart", "Stop", "StopFailure", "UserPromptSubmit"}

// claudeHookTimeout bounds each hook run, in seconds; orch-notify gives up
// on the broker after ORCH_NOTIFY_TIMEOUT (3s) and spools the event.
const claudeHookTimeout = 30

// ClaudeSettingsPath is where a worker's Claude Code settings are written.
func ClaudeSettingsPath(orchDir, worker string) string {
	return filepath.Join(orchDir, orchdir.Agents, worker, ClaudeSettingsFile)
}

type claudeCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout"`
}

type claudeMatcher struct {
	Hooks []claudeCommand `json:"hooks"`
}

type claudePermissions struct {
	DefaultMode string   `json:"defaultMode,omitempty"`
	Allow       []string `json:"allow,omitempty"`
	Deny        []string `json:"deny,omitempty"`
}

type claudeSettings struct {
	Permissions *claudePermissions         `json:"permissions,omitempty"`
	Hooks       map[string][]claudeMatcher `json:"hooks"`
}

// ClaudeSettings is the settings document for one worker: each event in
// ClaudeHookEvents runs `<orch-notify> hook claude`, and with
// permissions "worktree" (config.PermWorktree, the default) the worker may
// run orch-notify (by its path or by name) and edit files in its working
// directory (acceptEdits) without asking; anything else still asks. It
// holds no secret: orch-notify finds the broker and credentials from the
// pane's environment.
//
// orchDir's files (the worker's own hooks and settings, the spool, the
// credentials) are never edited without asking, whatever the mode: in
// shared isolation they are inside the agent's working directory.
func ClaudeSettings(notifyBin, permissions, orchDir string) []byte {
	cmd := claudeCommand{Type: "command", Command: Quote(notifyBin) + " hook claude", Timeout: claudeHookTimeout}
	s := claudeSettings{Hooks: map[string][]claudeMatcher{}}
	for _, ev := range ClaudeHookEvents {
		s.Hooks[ev] = []claudeMatcher{{Hooks: []claudeCommand{cmd}}}
	}
	if permissions == "" || permissions == config.PermWorktree {
		allow := []string{"Bash(orch-notify:*)"}
		if notifyBin != "orch-notify" {
			allow = append([]string{"Bash(" + notifyBin + ":*)"}, allow...)
		}
		s.Permissions = &claudePermissions{DefaultMode: "acceptEdits", Allow: allow}
	}
	if orchDir != "" && permissions != config.PermSkip {
		if s.Permissions == nil {
			s.Permissions = &claudePermissions{}
		}
		// Claude Code's rule form for an absolute path starts with "//";
		// the worktrees under .orch/worktrees are the workers' own.
		d := "/" + filepath.Clean(orchDir)
		// (A rule ending in "/*" matches deeper paths too: each private
		// file and folder is named.)
		for _, f := range orchdir.PrivateFiles {
			s.Permissions.Deny = append(s.Permissions.Deny, "Edit("+d+"/"+f+")")
		}
		for _, sub := range orchdir.PrivateDirs {
			s.Permissions.Deny = append(s.Permissions.Deny, "Edit("+d+"/"+sub+"/**)")
		}
	}
	data, _ := json.MarshalIndent(s, "", "  ") // cannot fail: strings and ints
	return append(data, '\n')
}

// WriteClaudeSettings writes the worker's Claude Code settings file
// atomically, mode 0600 in a 0700 directory, and returns its path.
func WriteClaudeSettings(orchDir, worker, notifyBin, permissions string) (string, error) {
	path := ClaudeSettingsPath(orchDir, worker)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("claude hooks for %s: %w", worker, err)
	}
	if err := atomicfile.Write(path, ClaudeSettings(notifyBin, permissions, orchDir), 0o600); err != nil {
		return "", fmt.Errorf("claude hooks for %s: %w", worker, err)
	}
	return path, nil
}

// tomlArray writes strings as a TOML array of basic strings.
func tomlArray(items ...string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// tomlString writes s as a TOML basic string: quotes, backslashes and
// every control character escaped.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
