package lead

import (
	"testing"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
)

// TestOutage: a plan failed by an outage is queued again, also when the
// hook named no plan (a shared checkout's branch names none); a plan that
// is not failed (timed out first) never moves.
func TestOutage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plan   string // the event's plan
		state  state.PlanState
		want   state.PlanState
		reason string
	}{
		{"hook names the plan", "p", state.PlanFailed, state.PlanQueued, "agent a out of service (rate_limit): queued again on a, try 2 of 2"},
		{"hook in a shared checkout", "", state.PlanFailed, state.PlanQueued, "agent a out of service (rate_limit): queued again on a, try 2 of 2"},
		{"timed out first", "p", state.PlanTimedOut, state.PlanTimedOut, "ran 3.0s, limit 3s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := testLoop(t)
			writeFile(t, l.cfg.Root, "plans/p/PLAN.md", "---\nagent: [a, b]\n---\nbody\n")
			l.st.Worker("w1").Profile = "a"
			p := l.st.Plans["p"]
			p.State, p.Reason = tc.state, "ran 3.0s, limit 3s"
			if tc.state == state.PlanFailed {
				p.Reason = "agent failed: rate_limit: 429"
			}
			e := workerEvent(event.Failed, tc.plan, "w1", "rate_limit: 429")
			cb := l.outage(e, event.NewCallback(event.CallbackFailed, e.ID, "p", "w1", p.Reason, ""))
			if p.State != tc.want || p.Reason != tc.reason {
				t.Errorf("plan %s (%s), want %s (%s)", p.State, p.Reason, tc.want, tc.reason)
			}
			if cb == nil {
				t.Fatal("no callback")
			}
		})
	}
}
