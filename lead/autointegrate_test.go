package lead

import (
	"slices"
	"testing"
	"time"

	"github.com/orch-dev/orch/integrate"
	"github.com/orch-dev/orch/internal/state"
)

// What an auto run takes: approved plans whose dependencies are integrated
// or taken too; a conflict, a failure at integration, a record in flight or
// a plan held back keeps the plan and its dependents out.
func TestToIntegrate(t *testing.T) {
	run := func(name string, st state.PlanState, deps ...string) *state.Run {
		return &state.Run{Name: name, State: st, Updated: testNow, Def: &state.Def{DependsOn: deps}}
	}
	for _, tc := range []struct {
		name  string
		plans []*state.Run
		prep  func(l *Loop)
		want  []string
	}{
		{"a chain, all approved", []*state.Run{run("d1", state.PlanDone), run("d2", state.PlanVerified, "d1"), run("d3", state.PlanDone, "d1"), run("d4", state.PlanDone, "d2", "d3")}, nil,
			[]string{"d1", "d2", "d3", "d4"}},
		{"a dependency integrated, one still running", []*state.Run{run("d1", state.PlanIntegrated), run("d2", state.PlanDone, "d1"), run("d3", state.PlanRunning, "d1"), run("d4", state.PlanDone, "d2", "d3")}, nil,
			[]string{"d2"}},
		{"a conflict stops the plan and its dependents only", []*state.Run{run("a", state.PlanConflict), run("b", state.PlanDone, "a"), run("c", state.PlanDone)}, nil,
			[]string{"c"}},
		{"failed at integration stays out", []*state.Run{{Name: "a", State: state.PlanFailed, Reason: integrate.Reason + "gate"}, run("b", state.PlanDone, "a")}, nil,
			nil},
		{"verification rounds are not integrated", []*state.Run{run("a", state.PlanVerifying), {Name: "a-verify-1", State: state.PlanDone, VerifyOf: "a"}}, nil,
			nil},
		{"a record in flight: it and its dependents wait", []*state.Run{run("a", state.PlanDone), run("b", state.PlanDone, "a"), run("c", state.PlanDone)},
			func(l *Loop) { l.inFlight["a"] = true }, []string{"c"}},
		{"held back while its record is as it was", []*state.Run{run("a", state.PlanDone), run("b", state.PlanDone)},
			func(l *Loop) { l.integrateHeld["a"] = testNow; l.integrateHeld["b"] = testNow.Add(-time.Minute) }, []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := testLoop(t)
			l.inFlight, l.integrateHeld = map[string]bool{}, map[string]time.Time{}
			l.st.Plans = map[string]*state.Run{}
			for _, p := range tc.plans {
				l.st.Plans[p.Name] = p
			}
			if tc.prep != nil {
				tc.prep(l)
			}
			got := l.toIntegrate()
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// A plan stopped because its dependencies conflicted goes back to the
// queue once one of them has a new attempt that is done again; a started
// plan is never touched, only flagged stale.
func TestRestack(t *testing.T) {
	l, _ := testLoop(t)
	writeFile(t, l.cfg.Root, "plans/z/PLAN.md", "---\ndepends_on: [x, y]\n---\nbody\n")
	stuck := func() *state.Run {
		return &state.Run{Name: "z", State: state.PlanConflict, Unmerged: []string{"shared.txt"}, Reason: "conflict",
			Stack: []state.StackDep{{Plan: "x", Attempt: 1}, {Plan: "y", Attempt: 1}}}
	}
	l.st.Plans = map[string]*state.Run{
		"x": {Name: "x", State: state.PlanDone, Attempts: 1},
		"y": {Name: "y", State: state.PlanRunning, Attempts: 2},
		"z": stuck(),
	}
	if l.restack() || l.st.Plans["z"].State != state.PlanConflict {
		t.Fatalf("y's new attempt is not done yet: z %+v", l.st.Plans["z"])
	}
	l.st.Plans["y"].State = state.PlanDone
	if !l.restack() {
		t.Fatal("not queued again")
	}
	if z := l.st.Plans["z"]; z.State != state.PlanQueued || z.Unmerged != nil || z.Stack != nil {
		t.Errorf("z %+v", z)
	}
	// Started from y's attempt 1: flagged, not moved.
	started := &state.Run{Name: "s", State: state.PlanRunning, Base: "b0", Stack: []state.StackDep{{Plan: "y", Attempt: 1, Commit: "c1"}}}
	l.st.Plans["s"] = started
	if l.restack() || started.State != state.PlanRunning {
		t.Errorf("a started plan was moved: %+v", started)
	}
	if got := l.st.StaleStack(started); len(got) != 1 || got[0] != "y (attempt 2; s started from attempt 1)" {
		t.Errorf("stale %q", got)
	}
}
