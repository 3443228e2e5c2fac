package lead

import (
	"fmt"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/plans"
)

// What an agent's own hooks report (orch-notify hook, see package agent):
// needs-input (it waits for a person), idle (its turn ended) and failed (it
// stopped on an error). They may leave the plan out; it is then the plan
// the worker holds. Like every worker event they count only from the
// worker holding the plan.

// working says whether a plan is with its worker and not finished: the
// states a worker event can move it out of.
func working(state string) bool {
	return state == PlanDispatched || state == PlanRunning || state == PlanNeedsInput
}

// hookHolder finds the plan a hook event is about and checks that its
// worker holds it and is still working on it. A non-empty note means the
// event has no effect (refused or ignored) and says why.
func (l *Loop) hookHolder(e *event.Event) (*Plan, *Worker, string) {
	if e.Plan == "" {
		w := l.st.Worker(e.Worker)
		if w == nil {
			return nil, nil, l.refuse(*e, "unknown worker "+e.Worker)
		}
		if w.Plan == "" {
			return nil, nil, "ignored: " + w.ID + " holds no plan"
		}
		// A hook that names no plan and fired before the worker took its
		// plan was about the one before (a turn that ended after its done).
		if e.Time.Before(w.Since) {
			return nil, nil, fmt.Sprintf("ignored: sent at %s, before %s took plan %s at %s",
				e.Time.Format(time.RFC3339Nano), w.ID, w.Plan, w.Since.Format(time.RFC3339Nano))
		}
		e.Plan = w.Plan
	}
	p, w, why := l.holder(*e)
	if why != "" {
		return nil, nil, l.refuse(*e, why)
	}
	if e.Attempt != 0 && e.Attempt != p.Attempts {
		return nil, nil, fmt.Sprintf("ignored: about attempt %d of %s, which is at attempt %d", e.Attempt, p.Name, p.Attempts)
	}
	if !working(p.State) {
		return nil, nil, "ignored: plan " + p.Name + " is " + p.State
	}
	return p, w, ""
}

// needsInput: the agent shows a permission or input prompt. The plan waits
// for a person, and the lead is told what the agent asks.
func (l *Loop) needsInput(e event.Event) (*Callback, string) {
	p, _, note := l.hookHolder(&e)
	if note != "" {
		return nil, note
	}
	if p.State == PlanNeedsInput && p.Reason == e.Status {
		return nil, "ignored: plan " + p.Name + " already needs input for this"
	}
	p.State, p.Reason, p.Updated = PlanNeedsInput, e.Status, l.cfg.Now().UTC()
	l.log.Info("needs input", "plan", p.Name, "worker", e.Worker, "message", e.Status)
	return newCallback(CallbackNeedsInput, e.ID, p.Name, e.Worker, e.Status, ""), "needs-input"
}

// idle: the agent's turn ended. If no done came for the plan, the agent
// stopped without finishing: the plan needs a person, and the lead is told
// whether RESULT.md is there. After a done the plan is no longer working,
// so the turn end that follows every done is ignored, never doubled.
func (l *Loop) idle(e event.Event) (*Callback, string) {
	p, w, note := l.hookHolder(&e)
	if note != "" {
		return nil, note
	}
	if e.Status == event.StillIdle && p.State == PlanNeedsInput {
		// A reminder that the agent still waits: the plan already waits,
		// for the reason given when it began to.
		return nil, "ignored: plan " + p.Name + " already waits: " + p.Reason
	}
	if p.State == PlanDispatched {
		// The dispatch line may have been typed while the agent was still
		// ending its previous turn; that turn's end says nothing about this
		// plan. An agent that never starts is caught by the ack deadline.
		return nil, "ignored: plan " + p.Name + " is not started yet (a turn that ended now may be the previous plan's)"
	}
	reason := "turn ended without orch-notify done (" + plans.RelResultPath(p.Name) + " written but no done sent)"
	if _, err := plans.ReadResult(l.workDir(w.ID), p.Name, MaxResult); err != nil {
		reason = "turn ended without orch-notify done (" + resultProblem(p.Name, err) + ")"
	}
	if p.State == PlanNeedsInput && p.Reason == reason {
		return nil, "ignored: plan " + p.Name + " already waits: " + reason
	}
	p.State, p.Reason, p.Updated = PlanNeedsInput, reason, l.cfg.Now().UTC()
	l.log.Warn("turn ended without done", "plan", p.Name, "worker", e.Worker, "reason", reason)
	return newCallback(CallbackIdle, e.ID, p.Name, e.Worker, reason, ""), "needs-input: " + reason
}

// agentFailed: the agent stopped on an error (an API error, say). The plan
// fails with the reason and the worker is free for the next plan.
func (l *Loop) agentFailed(e event.Event) (*Callback, string) {
	p, w, note := l.hookHolder(&e)
	if note != "" {
		return nil, note
	}
	reason := e.Status
	if reason == "" {
		reason = "the agent reported a failure"
	}
	p.State, p.Reason, p.Updated = PlanFailed, "agent failed: "+reason, l.cfg.Now().UTC()
	l.free(w)
	l.log.Warn("agent failed", "plan", p.Name, "worker", e.Worker, "reason", reason)
	return l.verificationFailed(p, newCallback(CallbackFailed, e.ID, p.Name, e.Worker, p.Reason, "")), "failed: " + reason
}
