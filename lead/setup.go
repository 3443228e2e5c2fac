package lead

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
)

// The setup command (orch.yaml's setup) readies a worker's worktree before
// the plan's line is typed: npm ci, a build, a database. It can take
// minutes, so it runs off the loop: the plan stays queued and its worker
// busy (Plan.Preparing names the attempt) while other events are handled.
// Its end (fleet.Setups) becomes a prepared record in the stream
// (reportSetup), handled like any event: the plan is dispatched, or failed
// with the command's exit and last line. A lead loop that stops meanwhile
// kills it (its process group is tracked, like a gate's); the next one
// runs it again.

// The back-off after a failed setup: 2 s, doubling, at most a minute.
const (
	setupBackoffMin = 2 * time.Second
	setupBackoffMax = time.Minute
)

// resumeSetups runs again the setup commands that were running when the
// last lead loop stopped, as a run of their own: a record the old run
// left in the stream is ignored (its attempt is no longer Preparing).
func (l *Loop) resumeSetups() {
	for _, p := range l.st.Plans {
		if p.State != state.PlanQueued || p.Preparing == 0 {
			continue
		}
		if w := l.st.Worker(p.Worker); w == nil || w.State == state.WorkerDead || w.Plan != p.Name {
			p.DropSetup()
			continue
		}
		// A run of its own: a record the old run left is told apart.
		p.SetupRuns++
		p.Preparing = p.SetupRuns
		if p.Measuring && p.Def != nil && p.Def.Bet != nil {
			// Its setup had passed: its baseline is measured again.
			l.gates.Measure(l.measureJob(p, phaseBaseline, p.Preparing, p.Worker, p.Def.Bet.MetricCmd))
			continue
		}
		l.fleet.RunSetup(p.Name, p.Preparing, p.Worker)
	}
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
}

// prepared handles the end of a setup command.
func (l *Loop) prepared(ctx context.Context, e event.Event) (*event.Callback, state.Note) {
	p := l.st.Plans[e.Plan]
	if p == nil || p.State != state.PlanQueued || p.Preparing != e.Attempt || p.Worker != e.Worker {
		return nil, state.Ignoring("no setup running for this attempt")
	}
	w := l.st.Worker(e.Worker)
	if w == nil || w.State == state.WorkerDead || w.Plan != p.Name {
		p.DropSetup()
		return nil, state.Noted("worker gone: plan queued again")
	}
	if why, failed := strings.CutPrefix(e.Status, "failed: "); failed {
		now := l.cfg.Now().UTC()
		p.Preparing = 0
		p.Attempts++
		reason := event.Clean("worktree for " + w.ID + ": " + why)
		p.State, p.Reason, p.Updated = state.PlanFailed, reason, now
		p.Def = nil
		l.free(w)
		// Likely the same for the next plan (the network is down, a file
		// must be fixed): new setups wait, longer while failures go on.
		l.setupBackoff = min(max(2*l.setupBackoff, setupBackoffMin), setupBackoffMax)
		l.setupHoldUntil = l.cfg.Now().Add(l.setupBackoff)
		l.log.Warn("setup failed: plan not dispatched", "plan", p.Name, "worker", w.ID, "why", why)
		return l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, p.Name, w.ID, reason, "")), state.Noted("failed: " + reason)
	}
	if e.Status != "ok" {
		return nil, l.refuse(e, fmt.Sprintf("prepared record with status %q", e.Status))
	}
	l.setupBackoff, l.setupHoldUntil = 0, time.Time{}
	// Dispatched once this record counts as handled.
	name := p.Name
	l.after(func() { l.dispatchPrepared(ctx, name) })
	return nil, state.Noted("setup passed")
}

// dispatchPrepared types the line of a plan whose setup passed.
func (l *Loop) dispatchPrepared(ctx context.Context, name string) {
	p := l.st.Plans[name]
	if p == nil || p.State != state.PlanQueued || p.Preparing == 0 {
		return
	}
	w := l.st.Worker(p.Worker)
	if w == nil || w.State == state.WorkerDead || w.Plan != p.Name || (!l.fleet.Panes() && !l.cfg.Headless) {
		p.DropSetup()
		if err := l.save(); err != nil {
			l.log.Error("save state", "err", err)
		}
		return
	}
	// dispatchTo sees Preparing set and does not prepare again.
	l.dispatchTo(ctx, p, w)
	if p.State == state.PlanDispatched {
		return
	}
	// It could not go out (failed, or queued again with the reason): the
	// worker it held is free, unless the attempt took it out of use.
	p.Preparing = 0
	if p.State == state.PlanQueued {
		p.Worker = ""
	}
	if w.Plan == p.Name && w.State == state.WorkerBusy {
		w.State, w.Plan = state.WorkerIdle, ""
	}
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
}
