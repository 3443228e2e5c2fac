package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/internal/orchdir"
)

// CodexHomeDir is the worker's own Codex home (CODEX_HOME), under
// .orch/agents/<wN>/: Codex writes its config.toml and sessions there, not
// into the user's ~/.codex.
const CodexHomeDir = "codex"

// prepareCodex seeds the worker's CODEX_HOME from the user's (their login,
// auth.json, linked; their config.toml, copied: providers, model, notices
// already answered) and returns the -c overrides a Codex worker runs with:
//   - notify: orch-notify hook codex, told of every turn's end;
//   - the repo root and the worker's checkout trusted (Codex keys trust by
//     the repository root; the inline-table form is the one its -c parser
//     reads for a path);
//   - with permissions "worktree": the workspace-write sandbox, with
//     network access (orch-notify's connection to the broker on 127.0.0.1:
//     Codex's sandbox has no per-port rule for a raw TCP connection) and
//     the spool writable (orch-notify's fallback, .orch/spool, is outside
//     the checkout); commands outside the sandbox ask (on-request);
//   - with "skip": --dangerously-bypass-approvals-and-sandbox;
//   - always: no update check, no background app-server daemon, pastes
//     taken as typed (the Enter after a fast send-keys is not swallowed).
func prepareCodex(w WorkerSpec, perm string) (Setup, error) {
	home := filepath.Join(w.OrchDir, orchdir.Agents, w.ID, CodexHomeDir)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return Setup{}, fmt.Errorf("codex home for %s: %w", w.ID, err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		return Setup{}, fmt.Errorf("codex home for %s: %w", w.ID, err)
	}
	if user := userCodexHome(w); user != "" {
		// The login is linked (one refresh token for all, see linkLogin),
		// the configuration copied.
		if err := linkLogin(filepath.Join(user, "auth.json"), filepath.Join(home, "auth.json")); err != nil {
			return Setup{}, fmt.Errorf("codex home for %s: %w", w.ID, err)
		}
		if err := copyNewer(filepath.Join(user, "config.toml"), filepath.Join(home, "config.toml")); err != nil {
			return Setup{}, fmt.Errorf("codex home for %s: %w", w.ID, err)
		}
	}
	c := []string{
		"notify=" + tomlArray(w.NotifyBin, "hook", "codex"),
		"projects=" + trustTable(w.Root, w.Dir),
		"check_for_update_on_startup=false",
		"features.daemon_auto_start=false",
		"disable_paste_burst=true",
	}
	var extra []string
	switch perm {
	case config.PermWorktree:
		c = append(c,
			`sandbox_mode="workspace-write"`,
			`approval_policy="on-request"`,
			"sandbox_workspace_write.network_access=true",
			"sandbox_workspace_write.writable_roots="+tomlArray(filepath.Join(w.OrchDir, "spool")))
	case config.PermSkip:
		extra = append(extra, "--dangerously-bypass-approvals-and-sandbox")
	}
	var b strings.Builder
	for i, o := range c {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("-c " + Quote(o))
	}
	for _, e := range extra {
		b.WriteString(" " + e)
	}
	return Setup{Args: b.String(), Env: map[string]string{"CODEX_HOME": home}}, nil
}

// userCodexHome is the user's own Codex home: CODEX_HOME, or ~/.codex.
func userCodexHome(w WorkerSpec) string {
	if d := w.getenv("CODEX_HOME"); d != "" {
		return d
	}
	if h := w.getenv("HOME"); h != "" {
		return filepath.Join(h, ".codex")
	}
	return ""
}

// trustTable is a TOML inline table trusting each directory.
func trustTable(dirs ...string) string {
	var parts []string
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		parts = append(parts, tomlString(d)+`={trust_level="trusted"}`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}
