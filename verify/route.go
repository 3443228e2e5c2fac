package verify

import (
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// route is where a round of v goes, as verify_with asks: to a worker of
// another agent than the author's (otherThan, kept on the round's run),
// or of a named one (agents, the round's PLAN.md agent:); whom says so
// for the parent's reason.
func route(v *plans.Verification) (agents plans.Agents, otherThan, whom string) {
	switch v.VerifyWith {
	case "":
		return nil, "", ""
	case plans.OtherAgent:
		if v.AuthorAgent == "" {
			// Not recorded (a plan harvested before agents were): no
			// agent can be told apart from it, and the round would wait
			// for ever.
			return nil, "", ""
		}
		return nil, v.AuthorAgent, ", of an agent other than " + v.AuthorAgent
	}
	return plans.Agents{v.VerifyWith}, "", ", of agent " + v.VerifyWith
}

// agentOf is the agent profile that ran p's current attempt: as its
// attempt record has it, else as its worker's record does.
func agentOf(st *state.State, p *state.Run) string {
	if a := p.Current(); a != nil && a.Profile != "" {
		return a.Profile
	}
	if w := st.Worker(p.Worker); w != nil {
		return w.Profile
	}
	return ""
}
