package lead

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
)

// FaultEnv names the fault-injection point at which orch serve kills itself
// with SIGKILL, for the reliability tests: before-harvest-commit,
// after-harvest-commit, after-ledger-commit, before-ack, for batched
// harvests batch-before-published-save, before-integrated-record (an
// integration by itself moved the base branch, its record is not out), and
// before-refresh (a fresh session decided and saved, not made). Unset in
// normal use.
const FaultEnv = "ORCH_FAULT"

// fault kills the process at the named point if ORCH_FAULT asks for it.
func (l *Loop) fault(point string) {
	if l.cfg.Fault != "" && l.cfg.Fault == point {
		l.log.Warn("fault injection: SIGKILL", "point", point)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; never continue past the point
	}
}

// retryBackoff is how long the broker waits before redelivering an event
// whose effect could not be committed (a git hook failed, the index was
// locked): 1s, 2s, 4s ... up to a minute. It is a bounded retry carried by a
// server-side timer per attempt, not a poll: nothing runs in between.
func retryBackoff(m jetstream.Msg) time.Duration {
	n := uint64(1)
	if md, err := m.Metadata(); err == nil {
		n = md.NumDelivered
	}
	d := time.Second
	for i := uint64(1); i < n && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// died handles a worker whose program ended: the worker is dead, and
// comes back in a new pane within its restart budget (restart.go); its plan
// is queued again once, and fails the second time.
func (l *Loop) died(e event.Event) (*event.Callback, state.Note) {
	w := l.st.Worker(e.Worker)
	if w == nil {
		return nil, l.refuse(e, "unknown worker "+e.Worker)
	}
	if e.Pane == "" {
		return nil, l.refuse(e, "a died event must name the pane that ended (ORCH_PANE)")
	}
	// A host's worker the lead never ran anything on has no pane in its
	// record: its host's word names the pane (only its host may send it).
	if e.Pane != w.Pane && (w.Remote == "" || w.Pane != "") {
		delete(l.paneEnded, e.Pane) // an old pane of a worker that has a new one
		return nil, state.Ignoring(fmt.Sprintf("pane %s is not %s's pane %s", e.Pane, w.ID, w.Pane))
	}
	if w.State == state.WorkerDead && w.DeadPane == e.Pane {
		delete(l.paneEnded, e.Pane) // its second report; the id may come back for a new pane
		return nil, state.Ignoring("already dead")
	}
	// Anyone with the worker key can publish a died: it is taken only for
	// a pane this loop saw end (its pidfd), or one tmux no longer shows as
	// the worker's live pane. A forged one would run the plan twice.
	// A host's worker's died comes from its host alone (its workers' keys
	// may not send one there, and hostRefusal checked the host).
	if w.Remote == "" && !l.paneEnded[e.Pane] && l.fleet.PaneAlive(w) {
		return nil, l.refuse(e, fmt.Sprintf("pane %s of %s is alive: a died event is taken only for a pane that has ended", e.Pane, w.ID))
	}
	delete(l.paneEnded, e.Pane)
	reason := e.Status
	if reason == "" {
		reason = "process ended"
	}
	plan := w.Plan
	w.Plan, w.Starting, w.Asked, w.Hooked, w.DeadPane = "", false, "", false, e.Pane
	then := l.grantRestart(w, reason)
	l.log.Warn("worker died", "worker", w.ID, "pane", e.Pane, "reason", reason, "plan", plan)
	p := l.st.Plans[plan]
	if p == nil || p.Worker != w.ID || !p.State.Working() {
		return event.NewCallback(event.CallbackDied, e.ID, w.ID, w.ID, reason+"; "+then, ""), state.Noted("worker dead")
	}
	return l.requeueOrFail(e, w, p, reason, then)
}

// lostPlan handles a plan whose worker's pane was gone at start (the worker
// already has a new pane): by now every event sent before the loss has been
// handled, so if the plan is still held, its work is lost and it is queued
// again (once), and the worker, in its new pane, is free.
func (l *Loop) lostPane(e event.Event) (*event.Callback, state.Note) {
	w := l.st.Worker(e.Worker)
	if w == nil {
		return nil, l.refuse(e, "unknown worker "+e.Worker)
	}
	p := l.st.Plans[e.Plan]
	if e.Attempt != 0 && p != nil && p.Attempts != e.Attempt {
		return nil, state.Ignoring(fmt.Sprintf("about attempt %d of %s, which is at attempt %d", e.Attempt, e.Plan, p.Attempts))
	}
	if p != nil && p.State == state.PlanQueued && p.Preparing != 0 && p.Worker == w.ID {
		// Only its setup was running (in the worktree, which outlives the
		// pane): it runs again, and the new pane gets the line.
		return nil, state.Ignoring(w.ID + " was only preparing " + e.Plan)
	}
	if e.Attempt == 0 && w.PID != 0 {
		// A record from before attempts were named, about a worker whose
		// process now runs (a later attempt): not about that one.
		return nil, state.Ignoring(w.ID + " runs a process now")
	}
	if w.Plan == e.Plan && w.PID == 0 {
		w.Plan = ""
		if !w.Starting { // a new pane's agent not at its prompt yet stays busy
			w.State, w.Since = state.WorkerIdle, l.cfg.Now().UTC()
		}
	}
	if p == nil || p.Worker != w.ID || !p.State.Working() {
		return nil, state.Ignoring("plan " + e.Plan + " no longer held by " + w.ID)
	}
	return l.requeueOrFail(e, w, p, e.Status, "")
}

// requeueOrFail queues a plan whose worker was lost again, once (attempt
// n+1, the reason kept for orch status); the second loss fails it. then,
// if set, says what becomes of the worker, for the lead.
func (l *Loop) requeueOrFail(e event.Event, w *state.Worker, p *state.Run, reason, then string) (*event.Callback, state.Note) {
	now := l.cfg.Now().UTC()
	tell := func(s string) string {
		if then == "" {
			return s
		}
		return s + "; " + then
	}
	if p.Requeued < 1 {
		p.Requeued++
		// A plan pinned to the lost worker (--to) is free to go elsewhere.
		p.State, p.Worker, p.Target, p.Reason, p.Updated, p.AttemptSince = state.PlanQueued, "", "", fmt.Sprintf("%s died (%s); queued again for attempt %d", w.ID, reason, p.Attempts+1), now, now
		p.Retry = fmt.Sprintf("attempt %d: %s died (%s) on attempt %d", p.Attempts+1, w.ID, reason, p.Attempts)
		return event.NewCallback(event.CallbackDied, e.ID, w.ID, w.ID, tell(fmt.Sprintf("%s; plan %s queued again (attempt %d)", reason, p.Name, p.Attempts+1)), ""), state.Noted("worker lost, plan queued again")
	}
	p.State, p.Worker, p.Reason, p.Updated = state.PlanFailed, w.ID, fmt.Sprintf("%s died (%s) on attempt %d; not retried (queued again once already)", w.ID, reason, p.Attempts), now
	return l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, p.Name, w.ID, tell(p.Reason), "")), state.Noted("worker lost, plan failed")
}

// flushOutbox stores the callbacks that no message carries. Their ids are
// fixed, so a crash after publishing and before saving stores nothing twice
// within the broker's duplicate window.
func (l *Loop) flushOutbox() {
	kept := l.st.Outbox[:0]
	for _, cb := range l.st.Outbox {
		if err := l.publishCallback(cb); err != nil {
			l.log.Error("callback not published yet; kept for the next start", "plan", cb.Plan, "err", err)
			kept = append(kept, cb)
		}
	}
	l.st.Outbox = kept
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
}
