package lead

import (
	"testing"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
)

// TestTimedOut: a timed-out record ends the attempt it names with how long
// it ran, keeps the worker busy while its agent is interrupted (once the
// record counts), and has no effect on another attempt or a plan no longer
// at work.
func TestTimedOut(t *testing.T) {
	record := func(attempt int) event.Event {
		e := event.Record(event.TimedOut, "id", "p", "w1", "", testNow)
		e.Attempt = attempt
		return e
	}
	t.Run("at work", func(t *testing.T) {
		l, _ := testLoop(t)
		p := l.st.Plans["p"]
		p.Deadline, p.Limit = testNow.Add(-500*time.Millisecond), "3s"
		cb, n := l.timedOut(record(1))
		if cb == nil || cb.Line != "WORKER-TIMED-OUT p: ran 3.5s, limit 3s" || cb.Kind != event.CallbackTimedOut {
			t.Fatalf("callback %+v", cb)
		}
		if p.State != state.PlanTimedOut || p.Reason != "ran 3.5s, limit 3s" || n.Kind == state.Ignored {
			t.Errorf("plan %s (%s), note %+v", p.State, p.Reason, n)
		}
		w := l.st.Worker("w1")
		if w.State != state.WorkerBusy || w.Plan != "" || w.Interrupting != "p" {
			t.Errorf("worker %+v, want busy interrupting p", w)
		}
		if len(l.pending) != 1 {
			t.Errorf("%d pending, want the interrupt once the record counts", len(l.pending))
		}
	})
	t.Run("on another host", func(t *testing.T) {
		l, _ := testLoop(t)
		p := l.st.Plans["p"]
		p.Deadline, p.Limit = testNow, "3s"
		w := l.st.Worker("w1")
		w.Remote, w.Headless, w.PID, w.Pane = "h2", true, 4242, ""
		if cb, _ := l.timedOut(record(1)); cb == nil || p.State != state.PlanTimedOut {
			t.Fatalf("callback %+v, plan %s", cb, p.State)
		}
		want := "p timed out; its agent on host h2 was not interrupted (orch does not interrupt another host's agents yet): busy until it ends"
		if w.State != state.WorkerBusy || w.Plan != "" || w.Interrupting != "" || w.Reason != want {
			t.Errorf("worker %+v, want busy, nothing interrupted, reason %q", w, want)
		}
		if len(l.pending) != 0 {
			t.Errorf("%d pending, want no interrupt of another host's agent", len(l.pending))
		}
	})
	for _, tc := range []struct {
		name    string
		attempt int
		state   state.PlanState
	}{
		{"another attempt", 2, state.PlanRunning},
		{"done first", 1, state.PlanDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := testLoop(t)
			p := l.st.Plans["p"]
			p.Deadline, p.Limit, p.State = testNow, "3s", tc.state
			cb, n := l.timedOut(record(tc.attempt))
			if cb != nil || n.Kind != state.Ignored || p.State != tc.state || l.st.Worker("w1").Interrupting != "" {
				t.Errorf("callback %+v, note %+v, plan %s", cb, n, p.State)
			}
		})
	}
}

func TestRanFor(t *testing.T) {
	for d, want := range map[time.Duration]string{
		3*time.Second + 40*time.Millisecond:    "3.0s",
		59*time.Second + 940*time.Millisecond:  "59.9s",
		45*time.Minute + 2400*time.Millisecond: "45m2s",
		2*time.Hour + time.Second:              "2h0m1s",
	} {
		if got := ranFor(d); got != want {
			t.Errorf("ranFor(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestResumeInterrupts: at start, an interrupt that was under way is
// settled by a new pane (its agent idle, or still starting: never
// interrupted, nor killed for a prompt slow to come); no fleet is touched.
func TestResumeInterrupts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		state    state.WorkerState
		starting bool
	}{
		{"new pane, agent idle", state.WorkerIdle, false},
		{"new pane, agent starting", state.WorkerBusy, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := testLoop(t)
			l.st.Plans["p"].State = state.PlanTimedOut
			w := l.st.Worker("w1")
			w.State, w.Plan, w.Starting, w.Interrupting = tc.state, "", tc.starting, "p"
			l.resumeDeadlines(t.Context()) // l.fleet is nil: an interrupt would panic
			if w.Interrupting != "" || w.State != tc.state {
				t.Errorf("worker %+v, want %s with nothing to interrupt", w, tc.state)
			}
		})
	}
}

// TestReviveRearmsDeadline: a plan failed for a late "started" and taken
// back gets its deadline's timer again (one that fired while it was failed
// did nothing), at once when the deadline has passed.
func TestReviveRearmsDeadline(t *testing.T) {
	l, _ := testLoop(t)
	l.deadlines = make(chan deadline, 1)
	p := l.st.Plans["p"]
	p.State, p.Unacked, p.Deadline, p.Limit = state.PlanFailed, true, testNow.Add(-time.Second), "3s"
	w := l.st.Worker("w1")
	w.State, w.Plan = state.WorkerIdle, ""
	if !l.revive(p, w) {
		t.Fatal("not revived")
	}
	select {
	case d := <-l.deadlines:
		if d != (deadline{plan: "p", attempt: 1}) {
			t.Errorf("deadline %+v, want p attempt 1", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no deadline after the revival")
	}
}
