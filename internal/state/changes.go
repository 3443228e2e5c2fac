package state

import (
	"fmt"
	"time"
)

// The changes of a run or a worker that every handler makes the same way.

// Working says whether a plan in state s is with its worker and not
// finished: the states a worker event can move it out of.
func (s PlanState) Working() bool {
	return s == PlanDispatched || s == PlanRunning || s == PlanNeedsInput
}

// Holder checks that worker holds plan and that an event of theirs sent
// at sent is about the plan's current attempt; a non-empty reason says why
// not.
func (st *State) Holder(plan, worker string, sent time.Time) (*Run, *Worker, string) {
	p := st.Plans[plan]
	if p == nil || p.Worker == "" {
		return nil, nil, fmt.Sprintf("plan %s was not dispatched to any worker", plan)
	}
	if worker == "" {
		return nil, nil, fmt.Sprintf("event has no worker id (set ORCH_WORKER); plan %s is held by %s", plan, p.Worker)
	}
	if worker != p.Worker {
		return nil, nil, fmt.Sprintf("plan %s is held by %s, not %s", plan, p.Worker, worker)
	}
	// Events are caused by the attempt, so they come after it began. One
	// from before was sent for an earlier attempt (and spooled, or delayed)
	// and must not change this one. Workers on other hosts need clocks in
	// step with the lead's (NTP).
	if !p.AttemptSince.IsZero() && sent.Before(p.AttemptSince) {
		return nil, nil, fmt.Sprintf("stale: sent at %s, before attempt %d of plan %s began at %s",
			sent.Format(time.RFC3339Nano), p.Attempts, plan, p.AttemptSince.Format(time.RFC3339Nano))
	}
	return p, st.Worker(worker), ""
}

// Revive takes back a plan that failed only because its worker w was slow
// to say "started": the worker is alive after all and the work counts. It
// says whether it did.
func (p *Run) Revive(w *Worker, now time.Time) bool {
	if p.State != PlanFailed || !p.Unacked || w == nil || (w.Plan != "" && w.Plan != p.Name) {
		return false // the worker has moved on to another plan
	}
	p.State, p.Unacked, p.Reason, p.Updated = PlanRunning, false, "", now.UTC()
	w.State, w.Plan, w.Reason = WorkerBusy, p.Name, ""
	return true
}

// Free lets go of w's plan: it is idle (unless dead or its agent still
// starting), or busy while its headless process finishes.
func (w *Worker) Free(now time.Time) {
	if w == nil {
		return
	}
	if w.State != WorkerDead && !w.Starting {
		w.State = WorkerIdle
	}
	if w.Headless && w.PID != 0 {
		// Its process is still finishing in the worktree: the next plan
		// waits for the exit (the exited record frees it).
		w.State, w.Reason = WorkerBusy, fmt.Sprintf("process %d finishing", w.PID)
	}
	w.Plan = ""
	w.Since = now.UTC()
}

// DropSetup puts back a plan whose worker went away while its setup ran:
// queued for another worker (a --to pin to the gone one is dropped, as for
// any lost worker).
func (p *Run) DropSetup() {
	if p.Target == p.Worker {
		p.Target = ""
	}
	p.Preparing, p.Worker, p.Reason = 0, "", "its worker went away during setup; queued again"
}
