package fleet

import (
	"fmt"
	"path/filepath"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/internal/state"
)

// A mixed fleet runs several agents: each worker has its own (Group),
// given at New for the workers this start brings up (Config.Groups, in
// order: the first group's workers are the lowest ids), and by Adopt for
// workers an earlier start left running. What the fleet does for a worker
// (its command line, its hooks, reading its screen) follows that worker's
// own agent.

// Group is Count workers that run one agent.
type Group struct {
	Agent   string         // a profile name or a command, as given
	Profile *agent.Profile // what Agent resolved to; nil: a plain command
	Count   int
}

// Label is how the record, the ledger and routing name the agent: the
// profile's name (claude, codex, one of orch.yaml's), or the program of a
// plain command ("orch" for 'orch agent').
func (g Group) Label() string {
	if g.Profile != nil && g.Profile.Name != "" {
		return g.Profile.Name
	}
	if prog := g.program(); prog != "" {
		return filepath.Base(prog)
	}
	return ""
}

// program is the program the group's agent command starts.
func (g Group) program() string {
	if g.Profile != nil {
		return g.Profile.Program()
	}
	p := agent.Profile{}
	p.Interactive = g.Agent
	return p.Program()
}

// assignGroups gives the workers this start brings up their agents.
func (f *Fleet) assignGroups() {
	f.agents = map[string]Group{}
	total := 0
	for _, g := range f.cfg.Groups {
		total += g.Count
	}
	ids := f.LocalIDs(total)
	for _, g := range f.cfg.Groups {
		for range g.Count {
			f.agents[ids[0]] = g
			ids = ids[1:]
		}
	}
}

// Adopt gives worker id, which an earlier start brought up and this one
// does not ask for, the agent it was started with (resolved from the
// record by the caller).
func (f *Fleet) Adopt(id string, g Group) {
	if _, ok := f.agents[id]; !ok {
		f.agents[id] = g
	}
}

// group is worker id's agent: its own, else the fleet's --agent.
func (f *Fleet) group(id string) Group {
	if g, ok := f.agents[id]; ok {
		return g
	}
	return Group{Agent: f.cfg.Agent, Profile: f.cfg.Profile}
}

// Profile is the profile worker id runs (nil: a plain command).
func (f *Fleet) Profile(id string) *agent.Profile { return f.group(id).Profile }

// Program is the program worker id's agent command starts.
func (f *Fleet) Program(id string) string { return f.group(id).program() }

// checkAgents refuses to re-adopt a live pane of another agent than this
// start asks of its worker: a pane is never taken for an agent it does
// not run. It runs before any pane starts.
func (f *Fleet) checkAgents(st *state.State, live map[string]bool) error {
	for _, w := range st.Workers {
		g, ok := f.agents[w.ID]
		if ok && live[w.ID] && w.Agent != "" && w.Agent != g.Agent {
			return fmt.Errorf("%w: %s's pane from an earlier orch serve runs %q, and this start asks %q of it: stop that fleet with orch down first, or ask for the same agents", ErrNoFleet, w.ID, w.Agent, g.Agent)
		}
	}
	return nil
}

// recordAgent writes worker w's agent into the record.
func (f *Fleet) recordAgent(w *state.Worker) {
	if g, ok := f.agents[w.ID]; ok {
		w.Agent, w.Profile = g.Agent, g.Label()
	}
}
