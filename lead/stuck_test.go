package lead

import (
	"testing"
	"time"

	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/state"
)

// The one decision when tmux stops answering: every pane worker of this
// machine becomes headless, a plan its pane held is reported lost (to be
// queued again once by its lost record), a setup under way and a dead
// worker are left to their own paths, and a second decision changes
// nothing.
func TestGoHeadless(t *testing.T) {
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	st := state.New()
	st.Workers = []*state.Worker{
		{ID: "w1", State: state.WorkerIdle, Pane: "%0", Starting: true},
		{ID: "w2", State: state.WorkerBusy, Pane: "%1", Plan: "run"},
		{ID: "w3", State: state.WorkerBusy, Pane: "%2", Plan: "setup"},
		{ID: "w4", State: state.WorkerDead, Pane: "%3", Reason: "pane exited"},
		{ID: "w5", State: state.WorkerBusy, Remote: "h1", Pane: "%9", Plan: "far"},
		{ID: "w6", State: state.WorkerBusy, Headless: true, PID: 42, Plan: "proc"},
	}
	st.Plans = map[string]*state.Run{
		"run":   {Name: "run", State: state.PlanRunning, Worker: "w2", Attempts: 1},
		"setup": {Name: "setup", State: state.PlanQueued, Worker: "w3", Preparing: 1},
		"far":   {Name: "far", State: state.PlanRunning, Worker: "w5", Attempts: 1},
		"proc":  {Name: "proc", State: state.PlanRunning, Worker: "w6", Attempts: 1},
	}
	lost, first := goHeadless(st, "tmux server not answering: tmux send-keys", now)
	if !first {
		t.Fatal("first decision reported as a repeat")
	}
	if st.TmuxDown == nil || !st.TmuxDown.Since.Equal(now) || st.TmuxDown.Reason != "tmux server not answering: tmux send-keys" {
		t.Fatalf("TmuxDown = %+v", st.TmuxDown)
	}
	want := []fleet.Lost{{Worker: "w2", Pane: "%1", Plan: "run", Attempt: 1}}
	if len(lost) != 1 || lost[0] != want[0] {
		t.Fatalf("lost = %+v, want %+v", lost, want)
	}
	for _, id := range []string{"w1", "w2", "w3", "w4"} {
		w := st.Worker(id)
		if !w.Headless || w.Pane != "" || w.Starting {
			t.Errorf("%s not made headless: %+v", id, w)
		}
	}
	if w := st.Worker("w1"); w.State != state.WorkerIdle {
		t.Errorf("w1 = %s, want idle", w.State)
	}
	if w := st.Worker("w2"); w.State != state.WorkerBusy || w.Plan != "run" {
		t.Errorf("w2 (its plan lost, not yet handled) = %s %q, want busy with run", w.State, w.Plan)
	}
	if w := st.Worker("w3"); w.State != state.WorkerBusy || w.Plan != "setup" {
		t.Errorf("w3 (setup running) = %s %q, want busy with setup", w.State, w.Plan)
	}
	if w := st.Worker("w4"); w.State != state.WorkerDead {
		t.Errorf("w4 = %s, want dead still", w.State)
	}
	if w := st.Worker("w5"); w.Headless || w.Pane != "%9" {
		t.Errorf("a host's worker changed: %+v", w)
	}
	if w := st.Worker("w6"); w.PID != 42 || w.Plan != "proc" {
		t.Errorf("a headless worker changed: %+v", w)
	}

	// Once decided, a second report changes nothing.
	st.Workers = append(st.Workers, &state.Worker{ID: "w7", State: state.WorkerIdle, Pane: "%7"})
	if lost, first := goHeadless(st, "again", now.Add(time.Minute)); first || lost != nil {
		t.Fatalf("second decision: lost %v first %v", lost, first)
	}
	if st.TmuxDown.Reason != "tmux server not answering: tmux send-keys" || st.Worker("w7").Headless {
		t.Fatalf("second decision changed the record: %+v", st.TmuxDown)
	}
}
