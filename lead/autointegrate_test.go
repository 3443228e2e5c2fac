package lead

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/integrate"
	"github.com/orch-dev/orch/internal/orchdir"
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

// An auto run's record has an id of its own per attempt: the same conflict
// after the plan was dispatched again is a new record (the broker would
// drop a copy, and the plan would wait for it forever), while the same
// outcome found again for the same attempt (a restart) is the same record.
func TestIntegrationRecordIDPerAttempt(t *testing.T) {
	orchDir := filepath.Join(t.TempDir(), orchdir.Name)
	spool := filepath.Join(orchDir, orchdir.Spool)
	if err := os.MkdirAll(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(context.Background(), broker.Config{Dir: orchDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	nc, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	nc.Close() // every record goes to the spool, where its id can be read
	l, _ := testLoop(t)
	l.orchDir, l.nc, l.b = orchDir, nc, b
	l.inFlight, l.integrateHeld = map[string]bool{}, map[string]time.Time{}
	l.st.Plans["a"] = &state.Run{Name: "a", State: state.PlanDone, Attempts: 1}
	report := func() string {
		t.Helper()
		rec := event.New(event.Integrated, "a", "conflict: shared.txt", "", "")
		l.integrationReported(context.Background(), integrationReport{rec: &rec})
		files, err := os.ReadDir(spool)
		if err != nil || len(files) != 1 {
			t.Fatalf("spool holds %d files (%v), want 1", len(files), err)
		}
		path := filepath.Join(spool, files[0].Name())
		got, err := event.ReadSpoolFile(path)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(path)
		return got.Event.ID
	}
	first := report()
	if !l.inFlight["a"] {
		t.Error("the record is not marked in flight")
	}
	if again := report(); again != first {
		t.Errorf("the same attempt's outcome found again got id %s, want %s", again, first)
	}
	l.st.Plans["a"].Attempts = 2
	if second := report(); second == first {
		t.Errorf("attempt 2's conflict has attempt 1's id %s: it would be dropped as a copy", first)
	}
}

// The end of an auto run holds back a plan it could not take (a git error)
// until its record changes, but not a plan skipped because a dependency
// did not go in this run: that one waits for its dependency alone, and
// goes once the dependency is in (here a's base branch kept moving, so a
// is tried again and b with it).
func TestIntegrationEndHolds(t *testing.T) {
	l, _ := testLoop(t)
	l.inFlight, l.integrateHeld = map[string]bool{}, map[string]time.Time{}
	l.st.Plans = map[string]*state.Run{
		"a": {Name: "a", State: state.PlanDone, Updated: testNow, Def: &state.Def{}},
		"b": {Name: "b", State: state.PlanDone, Updated: testNow, Def: &state.Def{DependsOn: []string{"a"}}},
		"c": {Name: "c", State: state.PlanDone, Updated: testNow, Def: &state.Def{}},
	}
	l.integrating = true
	l.integrationReported(context.Background(), integrationReport{end: true, names: []string{"a", "b", "c"}, steps: []integrate.Step{
		{Plan: "a", Outcome: integrate.Failed, Reason: "main kept moving", Moved: true},
		{Plan: "b", Outcome: integrate.Skipped, Reason: "depends on a, which was not integrated"},
		{Plan: "c", Outcome: integrate.Failed, Reason: "git broke"},
	}})
	if l.integrating {
		t.Error("still integrating after the end")
	}
	got := l.toIntegrate()
	slices.Sort(got)
	if want := []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("next run takes %v, want %v (c held, b not)", got, want)
	}
}
