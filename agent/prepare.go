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

// WorkerSpec is what Prepare needs to know of one worker.
type WorkerSpec struct {
	OrchDir   string // the repo's .orch
	Root      string // the repo root (its main checkout)
	Dir       string // the worker's checkout: its worktree, or Root
	ID        string // w1, w2, ...
	NotifyBin string // the orch-notify its hooks and dispatch line run
	// Permissions is orch.yaml's permissions (config.PermWorktree when
	// empty).
	Permissions string
	// Getenv reads the lead's environment (the user's HOME, an API key);
	// nil means os.Getenv.
	Getenv func(string) string
}

func (w WorkerSpec) getenv(k string) string {
	if w.Getenv == nil {
		return os.Getenv(k)
	}
	return w.Getenv(k)
}

// Setup is what a worker's agent gets from Prepare: arguments for its
// command line (shell-quoted, added after the profile's command) and
// environment for its process.
type Setup struct {
	Args string
	Env  map[string]string
}

// ClaudeConfigDir is the worker's own Claude Code configuration directory
// (CLAUDE_CONFIG_DIR), under .orch/agents/<wN>/.
const ClaudeConfigDir = "claude"

// Prepare readies one worker's agent so that it starts without a dialog
// and can deliver its callback, and returns what its command line and
// environment need. Nothing of the user's own configuration is changed:
// what orch writes is under .orch/agents/<wN>/.
//
// Claude Code: the hooks and permissions file (--settings), and a
// configuration directory of its own (CLAUDE_CONFIG_DIR) seeded from the
// user's: their login and preferences copied, onboarding marked done, the
// worker's checkout and the repo root trusted, the ANTHROPIC_API_KEY in
// the environment approved; the auto-updater off (a fleet must not change
// version mid-run). Codex: -c overrides for its notify program, trust of
// the checkout, and a sandbox that lets orch-notify reach the broker and
// the spool. Other profiles: nothing.
func (p Profile) Prepare(w WorkerSpec) (Setup, error) {
	perm := w.Permissions
	if perm == "" {
		perm = config.PermWorktree
	}
	switch p.Hooks {
	case "":
		return Setup{}, nil
	case HooksClaude:
		return prepareClaude(w, perm)
	case HooksCodex:
		return prepareCodex(w, perm)
	case HooksGemini:
		return prepareGemini(w, perm)
	}
	return Setup{}, fmt.Errorf("%s: hooks %q: want %s, %s, %s or nothing", p.Label(), p.Hooks, HooksClaude, HooksCodex, HooksGemini)
}

func prepareClaude(w WorkerSpec, perm string) (Setup, error) {
	path, err := WriteClaudeSettings(w.OrchDir, w.ID, w.NotifyBin, perm)
	if err != nil {
		return Setup{}, err
	}
	dir := filepath.Join(w.OrchDir, orchdir.Agents, w.ID, ClaudeConfigDir)
	if err := seedClaude(dir, w, perm); err != nil {
		return Setup{}, fmt.Errorf("claude config for %s: %w", w.ID, err)
	}
	s := Setup{
		Args: "--settings " + Quote(path),
		Env: map[string]string{
			"CLAUDE_CONFIG_DIR":   dir,
			"DISABLE_AUTOUPDATER": "1",
		},
	}
	if perm == config.PermSkip {
		s.Args += " --dangerously-skip-permissions"
	}
	return s, nil
}

// userClaudeDir is where the user's own Claude Code keeps its files: their
// CLAUDE_CONFIG_DIR, or ~/.claude (with ~/.claude.json beside it).
func userClaudeDir(w WorkerSpec) (dir, state string) {
	if d := w.getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return d, filepath.Join(d, ".claude.json")
	}
	home := w.getenv("HOME")
	if home == "" {
		return "", ""
	}
	return filepath.Join(home, ".claude"), filepath.Join(home, ".claude.json")
}

// claudeUserKeys are the parts of the user's .claude.json a worker's copy
// starts from: who they are and what they already answered, never their
// history or other projects.
var claudeUserKeys = []string{"oauthAccount", "userID", "primaryApiKey", "customApiKeyResponses", "hasCompletedOnboarding",
	"lastOnboardingVersion", "theme", "hasAvailableSubscription", "subscriptionNoticeCount"}

// seedClaude writes the worker's CLAUDE_CONFIG_DIR: .claude.json with the
// answers that keep Claude Code's first-run dialogs away, the user's
// credentials and settings copied in. What Claude Code itself wrote there
// on an earlier start is kept.
func seedClaude(dir string, w WorkerSpec, perm string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	userDir, userState := userClaudeDir(w)
	statePath := filepath.Join(dir, ".claude.json")
	state := map[string]any{}
	if err := readJSON(statePath, &state); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w (delete it; orch writes it again)", statePath, err)
	}
	if len(state) == 0 && userState != "" {
		user := map[string]any{}
		if err := readJSON(userState, &user); err == nil {
			for _, k := range claudeUserKeys {
				if v, ok := user[k]; ok {
					state[k] = v
				}
			}
		}
	}
	state["hasCompletedOnboarding"] = true
	state["autoUpdates"] = false
	// "Try the new fullscreen renderer?" is offered until it was seen 3
	// times.
	if n, _ := state["fullscreenUpsellSeenCount"].(float64); n < 3 {
		state["fullscreenUpsellSeenCount"] = 3
	}
	if perm == config.PermSkip {
		state["bypassPermissionsModeAccepted"] = true
	}
	// The API key in the environment is the user's choice: approve it, by
	// its last 20 characters, as Claude Code records an answer.
	if key := w.getenv("ANTHROPIC_API_KEY"); len(key) >= 20 {
		resp, _ := state["customApiKeyResponses"].(map[string]any)
		if resp == nil {
			resp = map[string]any{}
		}
		approved, _ := resp["approved"].([]any)
		tail := key[len(key)-20:]
		found := false
		for _, a := range approved {
			found = found || a == tail
		}
		if !found {
			approved = append(approved, tail)
		}
		resp["approved"] = approved
		if _, ok := resp["rejected"]; !ok {
			resp["rejected"] = []any{}
		}
		state["customApiKeyResponses"] = resp
	}
	projects, _ := state["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	for _, d := range []string{w.Root, w.Dir} {
		if d == "" {
			continue
		}
		pr, _ := projects[d].(map[string]any)
		if pr == nil {
			pr = map[string]any{}
		}
		pr["hasTrustDialogAccepted"] = true
		pr["hasCompletedProjectOnboarding"] = true
		projects[d] = pr
	}
	state["projects"] = projects
	data, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(statePath, append(data, '\n'), 0o600); err != nil {
		return err
	}
	if userDir == "" {
		return nil
	}
	// The user's login is linked, not copied: an OAuth refresh token is
	// good once, so N copies refreshed apart would log each other (and
	// the user) out; one file written in place is shared. Settings are
	// copied when newer than the worker's copy.
	if err := linkLogin(filepath.Join(userDir, ".credentials.json"), filepath.Join(dir, ".credentials.json")); err != nil {
		return err
	}
	for _, name := range []string{"settings.json", "CLAUDE.md"} {
		if err := copyNewer(filepath.Join(userDir, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// linkLogin makes dst a symbolic link to the user's login file src, when
// src is a regular file and dst is missing or a link. A dst that is a
// file of its own (the agent replaced the link when it saved a token) is
// left alone: it is the worker's login now.
func linkLogin(src, dst string) error {
	si, err := os.Stat(src)
	if err != nil || !si.Mode().IsRegular() {
		return nil
	}
	if di, err := os.Lstat(dst); err == nil {
		if di.Mode()&fs.ModeSymlink == 0 {
			return nil
		}
		if t, err := os.Readlink(dst); err == nil && t == src {
			return nil
		}
		if err := os.Remove(dst); err != nil {
			return err
		}
	}
	return os.Symlink(src, dst)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// copyNewer copies src to dst (mode 0600) when src is a regular file newer
// than dst, or dst is missing. A missing src is not an error.
func copyNewer(src, dst string) error {
	si, err := os.Stat(src)
	if err != nil || !si.Mode().IsRegular() {
		return nil
	}
	if di, err := os.Stat(dst); err == nil && !si.ModTime().After(di.ModTime()) {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := atomicfile.Write(dst, data, 0o600); err != nil {
		return err
	}
	return os.Chtimes(dst, si.ModTime(), si.ModTime())
}
