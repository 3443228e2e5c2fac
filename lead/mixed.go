package lead

import (
	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/fleet"
)

// A mixed fleet (orch serve --workers claude:3,codex:2): each worker runs
// its own agent (fleet.Group), recorded on the worker (state.Worker.Agent
// and Profile), and the scheduler routes plans by it (state.Fits).

// groupsOf is the fleet cfg asks for: its Groups, or Workers workers of
// its Agent; and the number of workers they make.
func groupsOf(cfg Config) ([]fleet.Group, int) {
	if len(cfg.Groups) == 0 {
		if cfg.Workers == 0 {
			return nil, 0
		}
		return []fleet.Group{{Agent: cfg.Agent, Profile: cfg.Profile, Count: cfg.Workers}}, cfg.Workers
	}
	n := 0
	for _, g := range cfg.Groups {
		n += g.Count
	}
	return cfg.Groups, n
}

// adoptAgents gives the workers an earlier start brought up, and this one
// does not ask for, the agent the record says they run: their panes are
// re-adopted as that agent (its hooks and screens), not as this start's.
func (l *Loop) adoptAgents() {
	for _, w := range l.st.Workers {
		if w.Agent == "" || w.Remote != "" {
			continue
		}
		p, err := agent.Resolve(w.Agent, l.conf)
		if err != nil {
			l.log.Warn("worker's recorded agent unusable; treated as the --agent", "worker", w.ID, "agent", w.Agent, "err", err)
			continue
		}
		l.fleet.Adopt(w.ID, fleet.Group{Agent: w.Agent, Profile: &p})
	}
}
