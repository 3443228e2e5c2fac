package main

import (
	"context"
	"fmt"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/config"
)

// resolveAgent turns --agent into a profile (orch.yaml's profiles
// included) and checks that its program is installed: a missing agent is an
// error at serve, never a fleet of panes that die at once, and never a
// silent swap for another agent.
func resolveAgent(ctx context.Context, spec string) (*agent.Profile, error) {
	cfg := config.Default()
	if root, err := repoRoot(ctx); err == nil {
		if cfg, err = config.Load(root); err != nil {
			return nil, err
		}
	}
	p, err := agent.Resolve(spec, cfg)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if _, err := p.Check(); err != nil {
		if p.Name != "" {
			return nil, fmt.Errorf("--agent %q: %s: %w; orch doctor lists the usable profiles", spec, p.Label(), err)
		}
		return nil, fmt.Errorf("--agent %q: %w", spec, err)
	}
	return &p, nil
}
