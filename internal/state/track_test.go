package state

import (
	"testing"
	"time"
)

// Track opens an attempt when a plan reaches its worker, counts each turn
// into needs-input once, and closes it with the state it left in; a plan
// taken back is "taken back", its next attempt a new bar.
func TestTrackAttempts(t *testing.T) {
	st := New()
	st.Workers = []*Worker{{ID: "w1", Profile: "codex"}, {ID: "w2"}}
	p := &Run{Name: "a", State: PlanQueued}
	st.Plans["a"] = p
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

	st.Track(at(0), "claude")
	if len(p.History) != 0 {
		t.Fatalf("queued plan without a worker has an attempt: %+v", p.History)
	}
	p.State, p.Worker, p.Attempts = PlanDispatched, "w1", 1
	st.Track(at(1), "claude")
	p.State = PlanNeedsInput
	st.Track(at(2), "claude")
	st.Track(at(3), "claude") // saved again while still asking: not counted twice
	p.State = PlanRunning
	st.Track(at(4), "claude")
	p.State = PlanNeedsInput
	st.Track(at(5), "claude")
	// Taken back: the worker died, the plan is queued for another.
	p.State, p.Worker, p.Attempts = PlanQueued, "", 2
	st.Track(at(6), "claude")
	p.State, p.Worker = PlanRunning, "w2"
	st.Track(at(7), "claude")
	p.State = PlanDone
	st.Track(at(9), "claude")

	if len(p.History) != 2 {
		t.Fatalf("history = %+v, want 2 attempts", p.History)
	}
	a, b := p.History[0], p.History[1]
	if a.N != 1 || a.Worker != "w1" || a.Profile != "codex" || !a.Start.Equal(at(1)) || a.End == nil || !a.End.Equal(at(6)) || a.Outcome != "taken back" || a.NeedsInput != 2 {
		t.Errorf("attempt 1 = %+v (end %v)", a, a.End)
	}
	if b.N != 2 || b.Worker != "w2" || b.Profile != "claude" || !b.Start.Equal(at(7)) || b.End == nil || !b.End.Equal(at(9)) || b.Outcome != "done" || b.NeedsInput != 0 {
		t.Errorf("attempt 2 = %+v (end %v)", b, b.End)
	}
	st.Track(at(10), "claude")
	if len(p.History) != 2 || !p.History[1].End.Equal(at(9)) {
		t.Errorf("a finished plan's history changed on a later save: %+v", p.History)
	}
}

// A plan whose gates run keeps its attempt open until they end; one that
// goes on to verification by others is done for its author.
func TestTrackGatesAndVerification(t *testing.T) {
	st := New()
	st.Workers = []*Worker{{ID: "w1"}}
	p := &Run{Name: "a", State: PlanRunning, Worker: "w1", Attempts: 1}
	st.Plans["a"] = p
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	st.Track(t0, "x")
	p.State, p.Gates = PlanVerifying, true
	st.Track(t0.Add(time.Minute), "x")
	if p.History[0].End != nil {
		t.Fatalf("attempt closed while its gates run: %+v", p.History[0])
	}
	p.Gates = false // gates passed; verification by other workers begins
	st.Track(t0.Add(2*time.Minute), "x")
	if h := p.History[0]; h.End == nil || h.Outcome != "done" {
		t.Fatalf("attempt after gates = %+v, want closed as done", h)
	}
}

// A setup run is part of the attempt it prepares (numbered as that
// attempt); a hand-off undone before anything reached the worker (the line
// could not be typed) leaves no attempt, and the plan handed out again to
// the same worker gets its attempt recorded.
func TestTrackSetupAndUndo(t *testing.T) {
	st := New()
	st.Workers = []*Worker{{ID: "w1"}}
	p := &Run{Name: "a", State: PlanQueued, Worker: "w1", Preparing: 1}
	st.Plans["a"] = p
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	st.Track(at(0), "x") // setup running
	p.State, p.Preparing, p.Attempts = PlanDispatched, 0, 1
	st.Track(at(2), "x") // dispatched after its setup
	if len(p.History) != 1 || p.History[0].N != 1 || !p.History[0].Start.Equal(at(0)) || p.History[0].End != nil {
		t.Fatalf("after setup and dispatch: %+v, want one open attempt 1 from the setup's start", p.History)
	}
	// The typed line failed: undone.
	p.State, p.Worker, p.Attempts = PlanQueued, "", 0
	st.Track(at(3), "x")
	if len(p.History) != 0 {
		t.Fatalf("undone hand-off left %+v", p.History)
	}
	p.State, p.Worker, p.Attempts = PlanDispatched, "w1", 1
	st.Track(at(4), "x")
	p.State = PlanDone
	st.Track(at(9), "x")
	if len(p.History) != 1 || !p.History[0].Start.Equal(at(4)) || p.History[0].End == nil || !p.History[0].End.Equal(at(9)) || p.History[0].Outcome != "done" {
		t.Fatalf("after the second hand-off: %+v", p.History)
	}
	if a := p.Current(); a == nil || a.N != 1 {
		t.Errorf("Current() = %+v, want attempt 1", a)
	}
}

// A plan that failed unacknowledged and is revived by its worker's late
// started goes on in the same attempt.
func TestTrackRevive(t *testing.T) {
	st := New()
	st.Workers = []*Worker{{ID: "w1"}}
	p := &Run{Name: "a", State: PlanDispatched, Worker: "w1", Attempts: 1}
	st.Plans["a"] = p
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	st.Track(t0, "x")
	p.State = PlanFailed
	st.Track(t0.Add(time.Minute), "x")
	p.State = PlanRunning
	st.Track(t0.Add(2*time.Minute), "x")
	if len(p.History) != 1 || p.History[0].End != nil || !p.History[0].Start.Equal(t0) {
		t.Fatalf("revived: %+v, want the first attempt open again", p.History)
	}
}
