package lead

import (
	"fmt"
	"path/filepath"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/fleet"
)

// notifyBin is the orch-notify that tmux hooks and agent hooks run: the one
// next to orch when known, else whichever is first on the worker's PATH.
func (l *Loop) notifyBin() string {
	if l.cfg.BinDir != "" {
		return filepath.Join(l.cfg.BinDir, "orch-notify")
	}
	return "orch-notify"
}

// prepareAgent readies worker id's agent (agent.Profile.Prepare: hooks,
// permissions, its own configuration under .orch/agents/<id>/) and returns
// what its command line and environment need.
func (l *Loop) prepareAgent(id string) (agent.Setup, error) {
	p := l.cfg.Profile
	if p == nil {
		return agent.Setup{}, nil
	}
	s, err := p.Prepare(agent.WorkerSpec{OrchDir: l.orchDir, Root: l.cfg.Root, Dir: l.workDir(id), ID: id,
		NotifyBin: l.notifyBin(), Permissions: l.conf.Permissions})
	if err != nil {
		return agent.Setup{}, fmt.Errorf("agent setup for %s: %w", id, err)
	}
	return s, nil
}

// paneCommand is what worker id's pane runs, and the environment its
// agent needs beside workerEnv's: the profile's interactive command with
// what prepareAgent set up. Without a profile it is the --agent command
// as given.
func (l *Loop) paneCommand(id string) (string, map[string]string, error) {
	if l.cfg.Profile == nil {
		return l.cfg.Agent, nil, nil
	}
	s, err := l.prepareAgent(id)
	if err != nil {
		return "", nil, err
	}
	return l.cfg.Profile.InteractiveCommand(s.Args), s.Env, nil
}

// headlessCommand is the command line that runs one plan headless on
// worker id, and the environment its agent needs: the profile's headless
// command with the dispatch line as its prompt and what prepareAgent set
// up; without a profile, the --agent command with the prompt as its last
// argument.
func (l *Loop) headlessCommand(id, prompt string) (string, map[string]string, error) {
	p := l.cfg.Profile
	if p == nil {
		return l.cfg.Agent + " " + fleet.ShellQuote(prompt), nil, nil
	}
	s, err := l.prepareAgent(id)
	if err != nil {
		return "", nil, err
	}
	return p.HeadlessCommand(prompt, s.Args), s.Env, nil
}
