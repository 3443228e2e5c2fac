package lead

import (
	"fmt"
	"slices"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
)

// Fallback on outage, never on failure. When a plan's agent fails with an
// error its hook calls an outage (agent.Outage: a quota, a rate limit, an
// overload, its login), the plan is queued again on the same agent up to
// OutageRetries times, then moved to the next agent of its agent: list.
// Each step is said in the plan's reason (orch status) and in the
// WORKER-FAILED callback orch wait prints. Nothing else moves a plan: a
// failed gate, a refutation, a permission stop, a timeout or an error
// that is not an outage leave it failed where it ran.

// OutageRetries is how many more tries a plan gets on its agent after an
// outage before the next agent of its agent: list takes it over.
const OutageRetries = 1

// outage handles a failed event that the session layer just recorded as
// cb: a plan whose agent: list goes on, failed by an outage, is queued
// again (on its agent, or on the next), and cb says so.
func (l *Loop) outage(e event.Event, cb *event.Callback) *event.Callback {
	if cb == nil {
		return cb
	}
	// cb names the plan the session layer failed: a hook in a shared
	// checkout names none (e.Plan is ""), and its worker's plan is meant.
	p := l.st.Plans[cb.Plan]
	if p == nil || p.State != state.PlanFailed || p.VerifyOf != "" || p.Worker != e.Worker {
		return cb
	}
	kind, ok := agent.Outage(e.Status)
	if !ok {
		return cb
	}
	def, err := l.planDef(p.Name)
	if err != nil || len(def.Agent) == 0 {
		return cb
	}
	cur := ""
	if w := l.st.Worker(p.Worker); w != nil {
		cur = w.Profile
	}
	p.Outages++
	target := p.Target
	var why string
	if p.Outages <= OutageRetries {
		why = fmt.Sprintf("agent %s out of service (%s): queued again on %s, try %d of %d", cur, kind, cur, p.Outages+1, OutageRetries+1)
	} else {
		gaveUp := append(slices.Clone(p.GaveUp), cur)
		left := slices.DeleteFunc(slices.Clone(def.Agent), func(a string) bool { return slices.Contains(gaveUp, a) })
		if len(left) == 0 {
			p.Reason += fmt.Sprintf(" (agent %s out of service after %d tries; no agent left in its agent: list)", cur, OutageRetries+1)
			return l.restate(cb, p)
		}
		p.GaveUp, p.Outages, target = gaveUp, 0, ""
		why = fmt.Sprintf("agent %s out of service (%s) after %d tries: moved to agent %s", cur, kind, OutageRetries+1, left[0])
	}
	now := l.cfg.Now().UTC()
	// The attempt ended failed (not taken back): stats count it against
	// its agent.
	if k := len(p.History); k > 0 && p.History[k-1].End == nil {
		p.History[k-1].End, p.History[k-1].Outcome = &now, string(state.PlanFailed)
	}
	// As orch dispatch queues it again (queue), keeping what the outages
	// decided, and the retries its deaths and fresh sessions had (once
	// each per orch dispatch: restart.go).
	*p = state.Run{Name: p.Name, State: state.PlanQueued, Reason: why, Target: target, Queued: now, AttemptSince: now, Updated: now, Attempts: p.Attempts,
		Base: p.Base, Stack: p.Stack, SetupRuns: p.SetupRuns, History: p.History, GaveUp: p.GaveUp, Outages: p.Outages,
		Requeued: p.Requeued, Refreshed: p.Refreshed}
	l.log.Warn("agent out of service; plan queued again", "plan", p.Name, "agent", cur, "kind", kind, "reason", why)
	return l.restate(event.NewCallback(event.CallbackFailed, cb.Event, cb.Plan, cb.Worker, cb.Status+"; "+why, cb.Commit), p)
}

// restate is cb with p's reason as its status when p is still failed.
func (l *Loop) restate(cb *event.Callback, p *state.Run) *event.Callback {
	if p.State == state.PlanFailed {
		return event.NewCallback(event.CallbackFailed, cb.Event, cb.Plan, cb.Worker, p.Reason, cb.Commit)
	}
	return cb
}
