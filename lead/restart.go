package lead

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/tmux"
)

// Workers that come back. A worker whose pane's program ends, or whose
// headless process is killed mid-plan, is dead; the died (or exited)
// handler grants it a restart within its budget: at most RestartBudget in
// RestartWindow, each after a back-off that doubles (RestartFirst, then
// twice that, ...). One one-shot timer per granted restart sends the
// worker's id on restartDue, which the loop selects on (restartNow): a
// new pane in the same worktree, or, headless, the worker usable again
// (each plan is a process of its own). A worker that dies with its budget
// spent stays dead, with the reason; orch serve started again gives it a
// new pane and a fresh budget. The plan it held goes back to the queue
// once (requeueOrFail); its second loss fails it.
//
// An agent that runs out of context (its own signal, an exhausted event:
// see notify.ClaudeHookEvent) gets a fresh session in the same worktree at
// once, not counted against the budget, and its plan the dispatch line
// again as its next attempt (refresh); the second time, the plan fails.

// The restart budget (README "Dead workers come back").
const (
	RestartBudget = 3
	RestartWindow = 10 * time.Minute
	RestartFirst  = time.Second
)

// restartDelay decides a worker's next restart at now from the times of
// its earlier ones: those still within RestartWindow (kept), the back-off
// before the next (RestartFirst doubled for each kept one), and whether
// there is one at all (false once RestartBudget of them are in the
// window).
func restartDelay(past []time.Time, now time.Time) (kept []time.Time, delay time.Duration, ok bool) {
	for _, t := range past {
		if now.Sub(t) < RestartWindow {
			kept = append(kept, t)
		}
	}
	if len(kept) >= RestartBudget {
		return kept, 0, false
	}
	return kept, RestartFirst << len(kept), true
}

// grantRestart records a worker's death (why) and decides whether it
// comes back: the worker is dead either way; with a restart granted its
// timer is armed once the event is recorded. It returns what the lead is
// told of the worker's fate.
func (l *Loop) grantRestart(w *state.Worker, why string) string {
	now := l.cfg.Now().UTC()
	w.State, w.Since, w.RestartAt, w.Interrupting, w.Refresh = state.WorkerDead, now, time.Time{}, "", false
	if w.Remote != "" {
		w.Reason = why
		return w.ID + " is a host's worker: its host brings it back"
	}
	// A session that does not answer is not gone: the worker comes back
	// headless with every pane worker (stuck.go).
	if !w.Headless && !l.fleet.SessionUp(l.st.Session) && l.fleet.NotAnswering() == nil {
		w.Reason = why + "; not restarted: tmux session " + l.st.Session + " is gone (orch serve --workers N started again brings the fleet up)"
		return w.ID + " not restarted: its tmux session is gone"
	}
	kept, delay, ok := restartDelay(w.Restarts, now)
	w.Restarts = kept
	if !ok {
		w.Reason = fmt.Sprintf("%s; not restarted: it died %d times within %s (restart budget %d; orch serve started again brings it back)", why, len(kept)+1, RestartWindow, RestartBudget)
		l.log.Warn("worker dead: restart budget spent", "worker", w.ID, "deaths", len(kept)+1, "window", RestartWindow)
		return fmt.Sprintf("%s stays dead: restart budget spent (%d restarts within %s)", w.ID, RestartBudget, RestartWindow)
	}
	w.Restarts = append(kept, now)
	w.RestartAt = now.Add(delay)
	n := len(w.Restarts)
	w.Reason = fmt.Sprintf("%s; restart %d of %d in %s", why, n, RestartBudget, delay)
	id := w.ID
	l.after(func() { l.armRestart(id, delay) })
	l.log.Warn("worker died; restart granted", "worker", w.ID, "restart", n, "in", delay, "why", why)
	return fmt.Sprintf("%s restarts in %s (restart %d of %d within %s)", w.ID, delay, n, RestartBudget, RestartWindow)
}

// armRestart arms the one timer of a granted restart.
func (l *Loop) armRestart(id string, after time.Duration) {
	time.AfterFunc(after, func() { send(l, l.restartDue, id) })
}

// resumeRestarts takes up the restarts granted before orch serve stopped:
// a worker the fleet's start brought back (or that was alive) has nothing
// left to do, and a fresh budget; one still dead with a restart granted
// gets its timer again.
func (l *Loop) resumeRestarts() {
	now := l.cfg.Now()
	for _, w := range l.st.Workers {
		if w.State != state.WorkerDead {
			w.RestartAt, w.Restarts = time.Time{}, nil
		} else if !w.RestartAt.IsZero() {
			l.armRestart(w.ID, max(0, w.RestartAt.Sub(now)))
		}
	}
}

// resumeRefreshes makes the fresh sessions decided before orch serve
// stopped and not made yet (the worker still holds its plan, dispatched
// again), once the loop can tell the lead.
func (l *Loop) resumeRefreshes(ctx context.Context) {
	for _, w := range l.st.Workers {
		if !w.Refresh || w.State == state.WorkerDead || w.Remote != "" {
			continue
		}
		plan := ""
		if p := l.st.Plans[w.Plan]; p != nil && p.Worker == w.ID && p.State == state.PlanDispatched {
			plan = p.Name
		}
		l.log.Info("fresh session decided before the last stop: made now", "worker", w.ID, "plan", plan)
		l.refresh(ctx, w.ID, plan)
	}
}

// restartNow brings back a dead worker whose restart is due: a new pane
// in its worktree, or, headless, the worker usable again.
func (l *Loop) restartNow(ctx context.Context, id string) {
	w := l.st.Worker(id)
	if w == nil || w.State != state.WorkerDead || w.RestartAt.IsZero() {
		return // brought back meanwhile (orch serve's start), or not to be
	}
	if wait := w.RestartAt.Sub(l.cfg.Now()); wait > 0 {
		l.armRestart(id, wait) // a timer from before the record moved on
		return
	}
	w.RestartAt = time.Time{}
	if w.Headless {
		w.State, w.Reason, w.Since = state.WorkerIdle, "", l.cfg.Now().UTC()
		l.log.Info("worker restarted (headless: its next plan starts a new process)", "worker", id)
	} else {
		starting, err := l.fleet.Respawn(ctx, l.st.Session, w)
		if errors.Is(err, tmux.ErrNotAnswering) {
			// The worker comes back headless, as every pane worker does
			// now (stuck.go).
			l.tmuxStuck(err)
			w.State, w.Reason, w.Since = state.WorkerIdle, "", l.cfg.Now().UTC()
			l.log.Warn("worker restarted headless: tmux not answering", "worker", id)
		} else if err != nil {
			w.Reason += "; restart failed: " + event.Clean(err.Error())
			l.log.Error("worker not restarted", "worker", id, "err", err)
			l.st.Outbox = append(l.st.Outbox, event.NewCallback(event.CallbackDied, fmt.Sprintf("restart-%s-%d", id, l.cfg.Now().UnixNano()), id, id, "not restarted: "+err.Error(), ""))
			l.flushOutbox()
			return
		}
		if err == nil {
			if starting {
				l.sessions.Started([]*state.Worker{w})
			}
			l.log.Info("worker restarted in a new pane", "worker", id, "pane", w.Pane, "starting", starting)
		}
	}
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	l.schedule(ctx)
}

// exhausted handles an agent that ran out of context: its worker gets a
// fresh session in the same worktree and the plan its dispatch line
// again, as its next attempt, once; the second time the plan fails (and
// the worker still starts afresh for its next plan).
func (l *Loop) exhausted(e event.Event) (*event.Callback, state.Note) {
	p, w, note := l.sessions.Holder(l.st, &e)
	if !note.None() {
		return nil, note
	}
	if w.Remote != "" {
		return nil, state.Ignoring(w.ID + " is a host's worker: not restarted from here")
	}
	now := l.cfg.Now().UTC()
	why := event.OneLine(e.Status)
	if why == "" {
		why = "out of context"
	}
	id, plan := w.ID, p.Name
	if p.Refreshed >= 1 {
		p.State, p.Reason, p.Updated = state.PlanFailed, fmt.Sprintf("%s ran out of context again (%s) on attempt %d, after one fresh start; not restarted again", w.ID, why, p.Attempts), now
		if !w.Headless {
			w.Plan = "" // the new pane's agent is free for the next plan
		}
		w.Refresh = true
		l.after(func() { l.refresh(context.Background(), id, "") })
		l.log.Warn("out of context again: plan failed", "plan", plan, "worker", id, "why", why)
		return l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, plan, id, p.Reason, "")), state.Noted("failed: " + p.Reason)
	}
	p.Refreshed++
	p.Attempts++
	p.Retry = fmt.Sprintf("attempt %d: %s ran out of context (%s); given again to a fresh session in the same worktree", p.Attempts, w.ID, why)
	p.State, p.Reason, p.Updated, p.AttemptSince = state.PlanDispatched, "", now, now
	p.Resent, p.Typed, p.Enters, p.Echo, p.Waiting, p.IdleEvent, p.Unacked = false, false, 0, 0, false, "", false
	if d, err := time.ParseDuration(p.Limit); err == nil && p.Limit != "" {
		p.Deadline = now.Add(d) // a new attempt, a new time limit (timeout.go)
	}
	w.State, w.Plan, w.Since, w.Refresh = state.WorkerBusy, plan, now, true
	l.after(func() { l.refresh(context.Background(), id, plan) })
	l.log.Warn("out of context: fresh session, plan given again", "plan", plan, "worker", id, "attempt", p.Attempts, "why", why)
	return event.NewCallback(event.CallbackRestarted, e.ID, plan, id,
		fmt.Sprintf("%s ran out of context (%s); fresh session in the same worktree, plan given again (attempt %d)", id, why, p.Attempts), ""), state.Noted("fresh session: " + p.Retry)
}

// refresh gives worker id a fresh session, once its record is saved: a
// new pane (its old agent killed with its pane) or, headless, its process
// stopped; then plan, if any, its dispatch line. What cannot be done
// counts as the worker's death.
func (l *Loop) refresh(ctx context.Context, id, plan string) {
	l.fault("before-refresh")
	w := l.st.Worker(id)
	if w == nil || !w.Refresh {
		return // its death was handled meanwhile: a restart, or its budget, decides
	}
	if w.Headless {
		if err := l.fleet.StopRun(id, w.PID); err != nil {
			l.log.Error("stop the run that ran out of context", "worker", id, "err", err)
		}
		w.Refresh = false
		if plan == "" {
			l.save()
			return // its exit frees the worker
		}
		// The old process's exit names a pid that is no longer the
		// worker's: it has no effect.
		w.PID = 0
		l.oldSessionGone(plan)
		line, _ := fleet.DispatchLine(plan, l.fleet.NotifyBin())
		if err := l.startHeadless(w, plan, line); err != nil {
			l.refreshFailed(w, plan, err)
			return
		}
		l.armDeadline(l.st.Plans[plan])
		return
	}
	starting, err := l.fleet.Respawn(ctx, l.st.Session, w)
	if errors.Is(err, tmux.ErrNotAnswering) {
		// Not the worker's fault: it becomes headless with every pane
		// worker (stuck.go), and its fresh session is a process.
		l.tmuxStuck(err)
		if w.Headless {
			l.log.Warn("fresh session made headless: tmux not answering", "worker", id, "plan", plan)
			l.refresh(ctx, id, plan)
			return
		}
	}
	if err != nil {
		l.refreshFailed(w, plan, err)
		return
	}
	w.Refresh = false
	l.oldSessionGone(plan)
	if starting {
		l.sessions.Started([]*state.Worker{w})
	}
	if plan == "" {
		if !starting {
			w.State = state.WorkerIdle
		}
		if err := l.save(); err != nil {
			l.log.Error("save state", "err", err)
		}
		l.schedule(ctx)
		return
	}
	w.State, w.Plan = state.WorkerBusy, plan // held through the new agent's start
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	if err := l.sessions.TypeLine(ctx, l.st, w, plan); err != nil {
		l.refreshFailed(w, plan, err)
		return
	}
	l.armDeadline(l.st.Plans[plan])
}

// oldSessionGone starts plan's new attempt again now that the session
// that ran out of context is killed: what it sent until then (a done, a
// turn's end, sent after exhausted was handled and before the kill) is
// stale, never the new attempt's (state.Holder). Pane agents' events carry
// no attempt number; their time is what tells them apart.
func (l *Loop) oldSessionGone(plan string) {
	if p := l.st.Plans[plan]; plan != "" && p != nil {
		p.AttemptSince = l.cfg.Now().UTC()
	}
}

// refreshFailed: the fresh session could not be had. The worker is dead,
// with the reason; its plan goes back to the queue (or fails, the second
// time), and the lead is told.
func (l *Loop) refreshFailed(w *state.Worker, plan string, err error) {
	reason := "fresh session failed: " + event.Clean(err.Error())
	l.log.Error("fresh session failed", "worker", w.ID, "plan", plan, "err", err)
	w.State, w.Reason, w.Since, w.Plan, w.Refresh = state.WorkerDead, reason, l.cfg.Now().UTC(), "", false
	id := fmt.Sprintf("refresh-%s-%d", w.ID, l.cfg.Now().UnixNano())
	cb := event.NewCallback(event.CallbackDied, id, w.ID, w.ID, reason, "")
	if p := l.st.Plans[plan]; p != nil && p.Worker == w.ID && p.State.Working() {
		cb, _ = l.requeueOrFail(event.Event{ID: id}, w, p, reason, "")
	}
	l.st.Outbox = append(l.st.Outbox, cb)
	l.flushOutbox()
}
