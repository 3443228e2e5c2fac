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
	p.Preparing, p.Measuring, p.Worker, p.Reason = 0, false, "", "its worker went away during setup; queued again"
}

// MaxHistory bounds the attempts a run keeps for the boards' timeline.
const MaxHistory = 20

// Track brings each run's attempt history (the boards' timeline and the
// ledger's Attempts) up to date with where the run stands now: an attempt
// opens when the plan is with a worker (its setup, its work, its gates)
// and closes, with the plan's state as its outcome, when it leaves that
// worker. It also counts the times an attempt turned needs-input. It is
// called before every save, so it sees every state a run is saved in,
// whichever handler moved it.
func (st *State) Track(now time.Time, profile string) {
	now = now.UTC()
	for _, w := range st.Workers {
		if w.Profile == "" {
			w.Profile = profile
		}
	}
	for _, p := range st.Plans {
		n := p.Attempts
		if p.State == PlanQueued && p.Preparing != 0 {
			n++ // its setup runs: the attempt it prepares has not begun
		}
		var open *ledger.Attempt
		if k := len(p.History); k > 0 && p.History[k-1].End == nil {
			open = &p.History[k-1]
		}
		with := p.Worker != "" && (p.State.Working() || p.State == PlanVerifying && (p.Gates || p.Measuring) || p.State == PlanQueued && p.Preparing != 0)
		if open != nil && open.N > n {
			// Undone: the hand-off failed before anything reached the
			// worker (its line, its process, its setup): no attempt.
			p.History = p.History[:len(p.History)-1]
			open = nil
		}
		if open != nil && (!with || open.Worker != p.Worker || open.N != n) {
			end := now
			open.End, open.Outcome = &end, outcome(p, open)
			open = nil
		}
		if with && open == nil {
			open = p.reopen(n)
		}
		if with && open == nil {
			host, prof := "", profile
			if w := st.Worker(p.Worker); w != nil {
				host, prof = w.Host, w.Profile
			}
			p.History = append(p.History, ledger.Attempt{N: n, Worker: p.Worker, Host: host, Profile: prof, Start: now})
			if k := len(p.History); k > MaxHistory {
				p.History = append([]ledger.Attempt(nil), p.History[k-MaxHistory:]...)
			}
			open = &p.History[len(p.History)-1]
		}
		if open != nil && p.State == PlanNeedsInput && !p.Asking {
			open.NeedsInput++
		}
		p.Asking = p.State == PlanNeedsInput
	}
}

// reopen takes up again the newest record of attempt n on the run's
// worker when it was closed: the plan was revived (a late started after
// it failed unacknowledged), or its hand-off was undone and made again
// (a typed line or a process start failed). Nil when there is none.
func (p *Run) reopen(n int) *ledger.Attempt {
	k := len(p.History) - 1
	if k < 0 || p.History[k].N != n || p.History[k].Worker != p.Worker {
		return nil
	}
	h := &p.History[k]
	h.End, h.Outcome = nil, ""
	return h
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
