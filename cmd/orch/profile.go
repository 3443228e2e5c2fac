package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/fleet"
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

// resolveFleet turns --workers (given says it was on the command line;
// else orch.yaml's workers: count) into the fleet's groups, each agent
// resolved and checked like --agent. A count runs the --agent; agent:count
// groups name their own.
func resolveFleet(ctx context.Context, spec string, given bool, agentSpec string) ([]fleet.Group, error) {
	f, err := config.ParseFleet(spec)
	if err != nil {
		return nil, usageError{err}
	}
	cfg := config.Default()
	if root, err := repoRoot(ctx); err == nil {
		if cfg, err = config.Load(root); err != nil {
			return nil, err
		}
	}
	if !given {
		f = cfg.Workers
	}
	if len(f) == 0 {
		return nil, nil
	}
	if !f.Mixed() {
		if strings.TrimSpace(agentSpec) == "" {
			return nil, usagef("--workers needs --agent \"<command>\" (the agent each pane runs), or agent:count groups (--workers claude:3,codex:2)")
		}
		p, err := resolveAgent(ctx, agentSpec)
		if err != nil {
			return nil, err
		}
		return []fleet.Group{{Agent: agentSpec, Profile: p, Count: f[0].Count}}, nil
	}
	if strings.TrimSpace(agentSpec) != "" {
		return nil, usagef("--agent goes with --workers N; --workers %s names each group's agent already", f)
	}
	var groups []fleet.Group
	for _, g := range f {
		if names := agent.Names(cfg); !slices.Contains(names, g.Agent) {
			return nil, usagef("--workers %s: %s is not an agent profile (known: %s); orch.yaml's agents: adds one", f, g.Agent, strings.Join(names, ", "))
		}
		p, err := resolveAgent(ctx, g.Agent)
		if err != nil {
			return nil, err
		}
		groups = append(groups, fleet.Group{Agent: g.Agent, Profile: p, Count: g.Count})
	}
	return groups, nil
}

// fleetSpec writes groups as --workers takes them.
func fleetSpec(groups []fleet.Group) string {
	var f config.Fleet
	for _, g := range groups {
		f = append(f, config.Group{Agent: g.Agent, Count: g.Count})
	}
	return f.String()
}
