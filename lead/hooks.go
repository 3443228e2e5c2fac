package lead

import (
	"context"
	"fmt"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// What an agent's own hooks report (orch-notify hook, see package agent):
// needs-input (it waits for a person), idle (its turn ended) and failed (it
// stopped on an error). They may leave the plan out; it is then the plan
// the worker holds. Like every worker event they count only from the
// worker holding the plan.

// hookHolder finds the plan a hook event is about and checks that its
// worker holds it and is still working on it. A non-empty note means the
// event has no effect (refused or ignored) and says why.
func (l *Loop) hookHolder(e *event.Event) (*state.Run, *state.Worker, note) {
	if e.Plan == "" {
		w := l.st.Worker(e.Worker)
		if w == nil {
			return nil, nil, l.refuse(*e, "unknown worker "+e.Worker)
		}
		if w.Plan == "" {
			return nil, nil, ignoring(w.ID + " holds no plan")
		}
		// A hook that names no plan and fired before the worker took its
		// plan was about the one before (a turn that ended after its done).
		if e.Time.Before(w.Since) {
			return nil, nil, ignoring(fmt.Sprintf("sent at %s, before %s took plan %s at %s",
				e.Time.Format(time.RFC3339Nano), w.ID, w.Plan, w.Since.Format(time.RFC3339Nano)))
		}
		e.Plan = w.Plan
	}
	p, w, why := l.holder(*e)
	if why != "" {
		return nil, nil, l.refuse(*e, why)
	}
	if e.Attempt != 0 && e.Attempt != p.Attempts {
		return nil, nil, ignoring(fmt.Sprintf("about attempt %d of %s, which is at attempt %d", e.Attempt, p.Name, p.Attempts))
	}
	if !p.State.Working() {
		return nil, nil, ignoring("plan " + p.Name + " is " + string(p.State))
	}
	return p, w, note{}
}

// needsInput: the agent shows a permission or input prompt. The plan waits
// for a person, and the lead is told what the agent asks.
func (l *Loop) needsInput(e event.Event) (*event.Callback, note) {
	p, _, note := l.hookHolder(&e)
	if !note.none() {
		return nil, note
	}
	if p.State == state.PlanNeedsInput && p.Reason == e.Status {
		return nil, ignoring("plan " + p.Name + " already needs input for this")
	}
	p.State, p.Reason, p.Updated = state.PlanNeedsInput, e.Status, l.cfg.Now().UTC()
	l.log.Info("needs input", "plan", p.Name, "worker", e.Worker, "message", e.Status)
	return event.NewCallback(event.CallbackNeedsInput, e.ID, p.Name, e.Worker, e.Status, ""), noted("needs-input")
}

// idle: the agent's turn ended. If no done came for the plan, the agent
// stopped without finishing: the plan needs a person, and the lead is told
// whether RESULT.md is there. After a done the plan is no longer working,
// so the turn end that follows every done is ignored, never doubled.
func (l *Loop) idle(e event.Event) (*event.Callback, note) {
	p, w, note := l.hookHolder(&e)
	if !note.none() {
		return nil, note
	}
	if e.Status == event.StillIdle && p.State == state.PlanNeedsInput {
		// A reminder that the agent still waits: the plan already waits,
		// for the reason given when it began to.
		return nil, ignoring("plan " + p.Name + " already waits: " + p.Reason)
	}
	if msg, failed := l.fleet.FailedOnScreen(context.Background(), w, p.Name); failed {
		// The turn ended on an error that only the screen shows (Gemini
		// CLI's hooks fire AfterAgent after an API error, and say nothing
		// of it): the plan failed, it does not wait for a person.
		e.Kind, e.Status = event.Failed, msg
		return l.agentFailed(e)
	} else if l.fleet.ShowsFailures(w) && p.IdleEvent == "" {
		// The error may not be drawn yet: the turn's end is decided when
		// the screen has settled (the next screen read, or settleTimeout),
		// from the state saved with this event.
		p.IdleEvent = e.ID
		c := startCheck{worker: w.ID, idle: p.Name, attempt: p.Attempts}
		l.after(func() { time.AfterFunc(settleTimeout, func() { send(l, l.starts, c) }) })
		return nil, noted("turn ended: decided once " + w.ID + "'s screen settles")
	}
	return l.turnEnded(e, p, w)
}

// settleTimeout bounds the wait for an agent's screen to show the error a
// turn may have ended on.
const settleTimeout = time.Second

// settled decides a turn end that waited for p's screen: the error the
// screen shows, or else the turn's end without done.
func (l *Loop) settled(p *state.Run, w *state.Worker) {
	id := p.IdleEvent
	p.IdleEvent = ""
	if !p.State.Working() || p.Worker != w.ID {
		l.save()
		return
	}
	e := l.record(event.Idle, id, p.Name, w.ID, "")
	var cb *event.Callback
	if msg, failed := l.fleet.FailedOnScreen(context.Background(), w, p.Name); failed {
		e.Kind, e.Status = event.Failed, msg
		cb, _ = l.agentFailed(e)
	} else {
		cb, _ = l.turnEnded(e, p, w)
	}
	if cb != nil {
		l.st.Outbox = append(l.st.Outbox, cb)
	}
	l.flushOutbox()
}

// turnEnded: the agent's turn ended without done.
func (l *Loop) turnEnded(e event.Event, p *state.Run, w *state.Worker) (*event.Callback, note) {
	if p.State == state.PlanDispatched {
		// The dispatch line may have been typed while the agent was still
		// ending its previous turn; that turn's end says nothing about this
		// plan. An agent that never starts is caught by the ack deadline.
		return nil, ignoring("plan " + p.Name + " is not started yet (a turn that ended now may be the previous plan's)")
	}
	reason := "turn ended without orch-notify done (" + plans.RelResultPath(p.Name) + " written but no done sent)"
	if _, err := plans.ReadResult(l.workDir(w.ID), p.Name, harvest.MaxResult); err != nil {
		reason = "turn ended without orch-notify done (" + harvest.ResultProblem(p.Name, err) + ")"
	}
	if p.State == state.PlanNeedsInput && p.Reason == reason {
		return nil, ignoring("plan " + p.Name + " already waits: " + reason)
	}
	p.State, p.Reason, p.Updated = state.PlanNeedsInput, reason, l.cfg.Now().UTC()
	l.log.Warn("turn ended without done", "plan", p.Name, "worker", e.Worker, "reason", reason)
	return event.NewCallback(event.CallbackIdle, e.ID, p.Name, e.Worker, reason, ""), noted("needs-input: " + reason)
}

// agentFailed: the agent stopped on an error (an API error, say). The plan
// fails with the reason and the worker is free for the next plan.
func (l *Loop) agentFailed(e event.Event) (*event.Callback, note) {
	p, w, note := l.hookHolder(&e)
	if !note.none() {
		return nil, note
	}
	reason := e.Status
	if reason == "" {
		reason = "the agent reported a failure"
	}
	p.State, p.Reason, p.Updated = state.PlanFailed, "agent failed: "+reason, l.cfg.Now().UTC()
	l.free(w)
	l.log.Warn("agent failed", "plan", p.Name, "worker", e.Worker, "reason", reason)
	return l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, p.Name, e.Worker, p.Reason, "")), noted("failed: " + reason)
}
