package state

import (
	"fmt"
	"time"

	"github.com/orch-dev/orch/ledger"
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

// MaxHistory bounds the attempts a run keeps for the boards' timeline.
const MaxHistory = 20

// Track brings each run's attempt history (the boards' timeline and the
// ledger's Attempts) up to date with where the run stands now: an attempt
// opens when the plan is with a worker and closes, with the plan's state
// as its outcome, when it leaves that worker. It also counts the times an
// attempt turned needs-input. It is called before every save, so it sees
// every state a run is saved in, whichever handler moved it.
func (st *State) Track(now time.Time, profile string) {
	now = now.UTC()
	for _, p := range st.Plans {
		var open *ledger.Attempt
		if n := len(p.History); n > 0 && p.History[n-1].End == nil {
			open = &p.History[n-1]
		}
		// With its worker: working, its setup running, or its gates.
		with := p.Worker != "" && (p.State.Working() || p.State == PlanVerifying && p.Gates || p.State == PlanQueued && p.Preparing != 0)
		if open != nil && (!with || open.Worker != p.Worker || open.N != p.Attempts) {
			end := now
			open.End, open.Outcome = &end, outcome(p, open)
			open = nil
		}
		if with && open == nil && !p.closedAttempt(p.Attempts, p.Worker) {
			host, prof := "", profile
			if w := st.Worker(p.Worker); w != nil {
				host = w.Host
				if w.Profile != "" {
					prof = w.Profile
				}
			}
			p.History = append(p.History, ledger.Attempt{N: p.Attempts, Worker: p.Worker, Host: host, Profile: prof, Start: now})
			if n := len(p.History); n > MaxHistory {
				p.History = append([]ledger.Attempt(nil), p.History[n-MaxHistory:]...)
			}
			open = &p.History[len(p.History)-1]
		}
		if open != nil {
			if p.State == PlanNeedsInput && !p.Asking {
				open.NeedsInput++
			}
		}
		p.Asking = p.State == PlanNeedsInput
	}
}

// closedAttempt says whether attempt n on worker already has a closed
// record: a plan handed back to the same attempt (revived) reopens
// nothing twice.
func (p *Run) closedAttempt(n int, worker string) bool {
	for i := range p.History {
		if h := &p.History[i]; h.N == n && h.Worker == worker && h.End != nil {
			if p.State.Working() && h.Outcome == string(PlanFailed) {
				// Revived: the attempt goes on.
				h.End, h.Outcome = nil, ""
				return true
			}
			return true
		}
	}
	return false
}

// outcome is how attempt a ended, from where its run stands now.
func outcome(p *Run, a *ledger.Attempt) string {
	switch {
	case p.Worker != a.Worker || p.Attempts != a.N:
		if p.State == PlanQueued || p.State.Working() {
			return "taken back"
		}
	case p.State == PlanVerifying:
		return string(PlanDone) // harvested; others verify it now
	}
	return string(p.State)
}
