package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/internal/orchdir"
)

// NotifyBin is the orch-notify that tmux hooks and agent hooks run: the one
// next to orch when known, else whichever is first on the worker's PATH.
func (f *Fleet) NotifyBin() string {
	if f.cfg.BinDir != "" {
		return filepath.Join(f.cfg.BinDir, "orch-notify")
	}
	return "orch-notify"
}

// WaitsForPrompt says whether worker id's new pane starts as a Starting
// worker.
func (f *Fleet) WaitsForPrompt(id string) bool {
	p := f.Profile(id)
	return p != nil && p.WaitsForPrompt()
}

// prepareAgent readies worker id's agent (agent.Profile.Prepare: hooks,
// permissions, its own configuration under .orch/agents/<id>/) and returns
// what its command line and environment need.
func (f *Fleet) prepareAgent(id string) (agent.Setup, error) {
	p := f.Profile(id)
	if p == nil {
		return agent.Setup{}, nil
	}
	s, err := p.Prepare(agent.WorkerSpec{OrchDir: f.cfg.OrchDir, Root: f.cfg.Root, Dir: f.WorkDir(id), ID: id,
		NotifyBin: f.NotifyBin(), Permissions: f.cfg.Permissions})
	if err != nil {
		return agent.Setup{}, fmt.Errorf("agent setup for %s: %w", id, err)
	}
	// What the agent itself writes there (its configuration, sessions)
	// must be its user's.
	if dir := filepath.Join(f.cfg.OrchDir, orchdir.Agents, id); f.User(id) != nil {
		if _, err := os.Lstat(dir); err == nil {
			if err := f.User(id).Give(dir); err != nil {
				return agent.Setup{}, fmt.Errorf("agent setup for %s: %w", id, err)
			}
		}
	}
	return s, nil
}

// paneCommand is what worker id's pane runs, and the environment its
// agent needs beside workerEnv's: the profile's interactive command with
// what prepareAgent set up. Without a profile it is the --agent command
// as given.
func (f *Fleet) paneCommand(id string) (string, map[string]string, error) {
	g := f.group(id)
	if g.Profile == nil {
		return g.Agent, nil, nil
	}
	s, err := f.prepareAgent(id)
	if err != nil {
		return "", nil, err
	}
	return g.Profile.InteractiveCommand(s.Args), s.Env, nil
}

// headlessCommand is the command line that runs one plan headless on
// worker id, and the environment its agent needs: the profile's headless
// command with the dispatch line as its prompt and what prepareAgent set
// up; without a profile, the --agent command with the prompt as its last
// argument.
func (f *Fleet) headlessCommand(id, prompt string) (string, map[string]string, error) {
	g := f.group(id)
	p := g.Profile
	if p == nil {
		return g.Agent + " " + ShellQuote(prompt), nil, nil
	}
	s, err := f.prepareAgent(id)
	if err != nil {
		return "", nil, err
	}
	return p.HeadlessCommand(prompt, s.Args), s.Env, nil
}

// workerEnv is what each worker's process gets: how to reach the broker,
// which credentials to use, who it is, and orch-notify on its PATH. The
// credentials travel as a file path, never as a value on a command line.
func (f *Fleet) workerEnv(id string) map[string]string {
	env := map[string]string{
		"ORCH_URL":    f.cfg.BrokerURL,
		"ORCH_CREDS":  orchdir.WorkerKey(f.cfg.OrchDir, id), // its own key: it may speak only for itself
		"ORCH_WORKER": id,
		"ORCH_DIR":    f.cfg.OrchDir,
		// With ORCH_URL and ORCH_PREFIX both given, orch-notify need not
		// read broker.json.
		"ORCH_PREFIX": f.cfg.Prefix,
		// The tmux server may have been started by a client running in the
		// C locale; the agent should see the user's locale instead.
		"LC_ALL": os.Getenv("LC_ALL"),
	}
	path := os.Getenv("PATH")
	if f.cfg.BinDir != "" && !strings.HasPrefix(path, f.cfg.BinDir+string(os.PathListSeparator)) {
		path = f.cfg.BinDir + string(os.PathListSeparator) + path
	}
	env["PATH"] = path
	// Run as a user of its own: that user's HOME, and git's leave to work
	// in the worktree and the repo, whose tops the lead keeps.
	f.User(id).Env(env, f.WorkDir(id), f.cfg.Root)
	return env
}
