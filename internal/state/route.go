package state

import (
	"slices"
	"strings"
)

// Routing: which workers' agents may take a run. A plan's agent: list
// (plans.Agents) sends it to workers of the first listed agent the fleet
// has; a verification round asked to run on another agent (OtherThan)
// never goes to a worker of the author's. A worker of any state counts as
// the fleet having its agent: a plan waits for its agent's worker, never
// runs elsewhere because that worker is busy or dead.

// AgentFor is the agent of agents that p goes to: the first one some
// worker of the fleet runs and p did not give up after an outage. "" when
// agents is empty (any worker), or when the fleet runs none of them.
func (st *State) AgentFor(p *Run, agents []string) string {
	for _, a := range agents {
		if slices.Contains(p.GaveUp, a) {
			continue
		}
		if st.hasAgent(func(w *Worker) bool { return w.Profile == a }) {
			return a
		}
	}
	return ""
}

func (st *State) hasAgent(fits func(*Worker) bool) bool {
	return slices.ContainsFunc(st.Workers, fits)
}

// Fits says whether w's agent may take p, whose plan lists agents.
func (st *State) Fits(p *Run, agents []string, w *Worker) bool {
	if p.OtherThan != "" && w.Profile == p.OtherThan {
		return false
	}
	if len(agents) == 0 {
		return true
	}
	return w.Profile == st.AgentFor(p, agents)
}

// RouteWait says why no worker of the fleet may ever take p as things
// stand (its agents are not in the fleet), "" when some worker's agent
// fits it.
func (st *State) RouteWait(p *Run, agents []string) string {
	if len(agents) > 0 && st.AgentFor(p, agents) == "" {
		left := slices.DeleteFunc(slices.Clone(agents), func(a string) bool { return slices.Contains(p.GaveUp, a) })
		if len(left) == 0 {
			return "waiting: every agent of its agent: list was out of service (" + strings.Join(p.GaveUp, ", ") + "); orch dispatch it again"
		}
		return "waiting: no worker of agent " + strings.Join(left, " or ") + " in the fleet"
	}
	if p.OtherThan != "" && !st.hasAgent(func(w *Worker) bool { return w.Profile != p.OtherThan && !slices.Contains(p.Exclude, w.ID) }) {
		return "waiting: no worker of an agent other than " + p.OtherThan + " (the author's) to verify it"
	}
	return ""
}

// RouteNote is how orch status names the agent a queued p waits for,
// "" when any agent will do.
func (st *State) RouteNote(p *Run, agents []string) string {
	switch {
	case len(agents) > 0:
		return " of agent " + st.AgentFor(p, agents)
	case p.OtherThan != "":
		return " of an agent other than " + p.OtherThan
	}
	return ""
}
