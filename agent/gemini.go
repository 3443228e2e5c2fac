package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
)

// GeminiHomeDir is the worker's own Gemini CLI home (GEMINI_CLI_HOME,
// which holds .gemini/), under .orch/agents/<wN>/.
const GeminiHomeDir = "gemini"

// GeminiHookEvents are the Gemini CLI hook events orch installs, each
// calling orch-notify hook gemini with the hook's JSON on stdin.
var GeminiHookEvents = []string{"SessionStart", "BeforeAgent", "AfterAgent", "Notification"}

// geminiLogins are the user's Gemini CLI login files, linked into each
// worker's home (one refresh token for all, see linkLogin).
var geminiLogins = []string{"oauth_creds.json", "google_accounts.json", "gemini-credentials.json"}

// prepareGemini writes the worker's GEMINI_CLI_HOME: its settings.json is
// the user's (~/.gemini/settings.json) with orch's hooks added, the
// auto-updater and its notice off, and the API-key login chosen when
// GEMINI_API_KEY is set and the user chose none (else the CLI asks how to
// log in); the user's login files are linked. The workspace is trusted
// for the run (GEMINI_CLI_TRUST_WORKSPACE), so no trust dialog. With
// permissions "worktree", a policy file lets it run orch-notify.
func prepareGemini(w WorkerSpec, perm string) (Setup, error) {
	home := filepath.Join(w.OrchDir, orchdir.Agents, w.ID, GeminiHomeDir)
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Setup{}, fmt.Errorf("gemini home for %s: %w", w.ID, err)
	}
	for _, d := range []string{filepath.Dir(home), home, dir} {
		if err := os.Chmod(d, 0o700); err != nil {
			return Setup{}, fmt.Errorf("gemini home for %s: %w", w.ID, err)
		}
	}
	user := userGeminiDir(w)
	settings := map[string]any{}
	if user != "" {
		if err := readJSON(filepath.Join(user, "settings.json"), &settings); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Setup{}, fmt.Errorf("gemini settings: %s: %w", filepath.Join(user, "settings.json"), err)
		}
		for _, f := range geminiLogins {
			if err := linkLogin(filepath.Join(user, f), filepath.Join(dir, f)); err != nil {
				return Setup{}, fmt.Errorf("gemini home for %s: %w", w.ID, err)
			}
		}
	}
	general := object(settings, "general")
	general["enableAutoUpdate"] = false
	general["enableAutoUpdateNotification"] = false
	security := object(settings, "security")
	auth := object(security, "auth")
	if _, chosen := auth["selectedType"]; !chosen && w.getenv("GEMINI_API_KEY") != "" {
		auth["selectedType"] = "gemini-api-key"
	}
	hooks := object(settings, "hooks")
	cmd := map[string]any{"type": "command", "name": "orch", "command": Quote(w.NotifyBin) + " hook gemini", "timeout": claudeHookTimeout * 1000}
	for _, ev := range GeminiHookEvents {
		list, _ := hooks[ev].([]any)
		hooks[ev] = append(list, map[string]any{"hooks": []any{cmd}})
	}
	var args string
	policy := filepath.Join(dir, "policies", "orch.toml")
	switch perm {
	case config.PermWorktree:
		// Edits in the workspace without asking (auto_edit); of the shell,
		// only orch-notify (a policy rule: tools.allowed would also deny
		// every other command silently, instead of asking).
		args = "--approval-mode auto_edit"
		if err := os.MkdirAll(filepath.Dir(policy), 0o700); err != nil {
			return Setup{}, err
		}
		rule := "# Written by orch for this worker: run orch-notify without asking.\n[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = " +
			tomlString(w.NotifyBin) + "\ndecision = \"allow\"\npriority = 100\n"
		if err := atomicfile.Write(policy, []byte(rule), 0o600); err != nil {
			return Setup{}, err
		}
	case config.PermSkip:
		args = "--approval-mode yolo"
	}
	if perm != config.PermWorktree {
		if err := os.Remove(policy); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Setup{}, err
		}
	}
	data, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return Setup{}, err
	}
	if err := atomicfile.Write(filepath.Join(dir, "settings.json"), append(data, '\n'), 0o600); err != nil {
		return Setup{}, err
	}
	// One process instead of a launcher that ignores SIGTERM and its child.
	return Setup{Args: args, Env: map[string]string{"GEMINI_CLI_HOME": home, "GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_CLI_NO_RELAUNCH": "true"}}, nil
}

// userGeminiDir is the user's own ~/.gemini (under GEMINI_CLI_HOME when
// they set it).
func userGeminiDir(w WorkerSpec) string {
	if h := w.getenv("GEMINI_CLI_HOME"); h != "" {
		return filepath.Join(h, ".gemini")
	}
	if h := w.getenv("HOME"); h != "" {
		return filepath.Join(h, ".gemini")
	}
	return ""
}

// object returns m[key] as a JSON object, making it when missing (or not
// an object).
func object(m map[string]any, key string) map[string]any {
	o, ok := m[key].(map[string]any)
	if !ok {
		o = map[string]any{}
		m[key] = o
	}
	return o
}
