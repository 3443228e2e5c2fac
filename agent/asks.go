package agent

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/orch-dev/orch/config"
)

// Asks says what a worker of this profile will be asked, and why, given
// what Prepare does and what is on this machine: info for orch doctor, and
// a problem (with its fix) when a worker would stop at a dialog orch
// cannot prevent, such as a login.
func (p Profile) Asks(w WorkerSpec) (info, problem string) {
	perm := w.Permissions
	if perm == "" {
		perm = config.PermWorktree
	}
	switch p.Hooks {
	case HooksClaude:
		return claudeAsks(w, perm)
	case HooksCodex:
		return codexAsks(w, perm)
	case HooksGemini:
		return geminiAsks(w, perm)
	}
	return "orch prepares nothing for " + p.Label() + ": whatever it asks waits in its pane (orch read, orch send)", ""
}

func claudeAsks(w WorkerSpec, perm string) (string, string) {
	var says []string
	problem := ""
	userDir, _ := userClaudeDir(w)
	switch {
	case w.getenv("ANTHROPIC_API_KEY") != "":
		says = append(says, "login: ANTHROPIC_API_KEY from the environment (approved for each worker, no key dialog)")
	case w.getenv("CLAUDE_CODE_OAUTH_TOKEN") != "":
		says = append(says, "login: CLAUDE_CODE_OAUTH_TOKEN from the environment")
	case w.getenv("ANTHROPIC_AUTH_TOKEN") != "" || w.getenv("CLAUDE_CODE_USE_BEDROCK") != "" || w.getenv("CLAUDE_CODE_USE_VERTEX") != "":
		says = append(says, "login: the provider set in the environment")
	case userDir != "" && exists(filepath.Join(userDir, ".credentials.json")):
		says = append(says, "login: yours, linked from "+filepath.Join(userDir, ".credentials.json")+" (one login for all workers; for a long-lived one, claude setup-token and CLAUDE_CODE_OAUTH_TOKEN)")
	default:
		problem = "Claude Code has no login here: each worker would stop at its login screen. Log in once with claude (or set ANTHROPIC_API_KEY)"
	}
	says = append(says, "no onboarding, trust or fullscreen dialog (answered in each worker's own CLAUDE_CONFIG_DIR), auto-updater off")
	switch perm {
	case config.PermWorktree:
		says = append(says, "permissions "+perm+": runs orch-notify and edits its own checkout without asking; any other command, and edits elsewhere, ask (the plan is needs-input, naming the command); allow more in the repo's .claude/settings.json")
	case config.PermAgent:
		says = append(says, "permissions "+perm+": your and the repo's Claude Code settings decide; orch-notify itself may ask")
	case config.PermSkip:
		says = append(says, "permissions "+perm+": asks nothing (--dangerously-skip-permissions)")
		if os.Geteuid() == 0 && w.getenv("IS_SANDBOX") == "" {
			problem = "Claude Code refuses --dangerously-skip-permissions as root: run orch as another user, or use permissions: worktree"
		}
	}
	return strings.Join(says, "; "), problem
}

func codexAsks(w WorkerSpec, perm string) (string, string) {
	var says []string
	problem := ""
	home := userCodexHome(w)
	switch {
	case home != "" && exists(filepath.Join(home, "auth.json")):
		says = append(says, "login: yours, linked from "+filepath.Join(home, "auth.json")+" (one login for all workers)")
	case home != "" && configHasProvider(filepath.Join(home, "config.toml")):
		says = append(says, "login: the model provider of "+filepath.Join(home, "config.toml"))
	case w.getenv("OPENAI_API_KEY") != "":
		says = append(says, "login: OPENAI_API_KEY from the environment")
	default:
		problem = "Codex has no login here: each worker would stop at its sign-in screen. Run codex login once (or set a model_provider in ~/.codex/config.toml)"
	}
	says = append(says, "no trust dialog (the repo is trusted with -c), no update check, each worker its own CODEX_HOME")
	switch perm {
	case config.PermWorktree:
		says = append(says, "permissions "+perm+": workspace-write sandbox with network access (for the broker on 127.0.0.1) and .orch/spool writable; a command outside the sandbox asks (the plan is needs-input, naming it)")
	case config.PermAgent:
		says = append(says, "permissions "+perm+": your Codex settings decide; under Codex's default sandbox orch-notify cannot reach the broker or the spool")
	case config.PermSkip:
		says = append(says, "permissions "+perm+": asks nothing, no sandbox (--dangerously-bypass-approvals-and-sandbox)")
	}
	return strings.Join(says, "; "), problem
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// configHasProvider says whether a Codex config.toml names a model
// provider of its own (its login is that provider's key).
func configHasProvider(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "model_provider") {
			return true
		}
	}
	return false
}

func geminiAsks(w WorkerSpec, perm string) (string, string) {
	var says []string
	problem := ""
	user := userGeminiDir(w)
	switch {
	case w.getenv("GEMINI_API_KEY") != "":
		says = append(says, "login: GEMINI_API_KEY from the environment (the API-key login chosen for each worker unless your settings chose another)")
	case w.getenv("GOOGLE_API_KEY") != "" || w.getenv("GOOGLE_GENAI_USE_VERTEXAI") != "":
		says = append(says, "login: the provider set in the environment")
	case user != "" && exists(filepath.Join(user, "oauth_creds.json")):
		says = append(says, "login: yours, linked from "+filepath.Join(user, "oauth_creds.json")+" (one login for all workers)")
	default:
		problem = "Gemini CLI has no login here: each worker would stop at its login screen. Set GEMINI_API_KEY, or log in once with gemini"
	}
	says = append(says, "no trust dialog (GEMINI_CLI_TRUST_WORKSPACE), auto-update off, each worker its own GEMINI_CLI_HOME")
	switch perm {
	case config.PermWorktree:
		says = append(says, "permissions "+perm+": auto_edit (edits in its workspace) and a policy rule for orch-notify; any other shell command asks (the plan is needs-input, naming it; headless, Gemini CLI refuses it)")
	case config.PermAgent:
		says = append(says, "permissions "+perm+": your Gemini CLI settings decide; orch-notify itself may ask")
	case config.PermSkip:
		says = append(says, "permissions "+perm+": asks nothing (--approval-mode yolo)")
	}
	return strings.Join(says, "; "), problem
}
