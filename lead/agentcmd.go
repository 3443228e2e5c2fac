package lead

import (
	"fmt"
	"path/filepath"
)

// notifyBin is the orch-notify that tmux hooks and agent hooks run: the one
// next to orch when known, else whichever is first on the worker's PATH.
func (l *Loop) notifyBin() string {
	if l.cfg.BinDir != "" {
		return filepath.Join(l.cfg.BinDir, "orch-notify")
	}
	return "orch-notify"
}

// paneCommand is what worker id's pane runs: the agent profile's
// interactive command with its hooks installed for that worker (for Claude
// Code, .orch/agents/<id>/claude-settings.json and --settings pointing at
// it). Without a profile it is the --agent command as given.
func (l *Loop) paneCommand(id string) (string, error) {
	p := l.cfg.Profile
	if p == nil {
		return l.cfg.Agent, nil
	}
	hookArgs, err := p.InstallHooks(l.orchDir, id, l.notifyBin())
	if err != nil {
		return "", fmt.Errorf("agent hooks for %s: %w", id, err)
	}
	return p.InteractiveCommand(hookArgs), nil
}

// headlessCommand is the command line that runs one plan headless on
// worker id: the profile's headless command with the dispatch line as its
// prompt and the worker's hooks installed; without a profile, the --agent
// command with the prompt as its last argument.
func (l *Loop) headlessCommand(id, prompt string) (string, error) {
	p := l.cfg.Profile
	if p == nil {
		return l.cfg.Agent + " " + ShellQuote(prompt), nil
	}
	hookArgs, err := p.InstallHooks(l.orchDir, id, l.notifyBin())
	if err != nil {
		return "", fmt.Errorf("agent hooks for %s: %w", id, err)
	}
	return p.HeadlessCommand(prompt, hookArgs), nil
}
