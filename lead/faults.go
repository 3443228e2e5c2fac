package lead

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/state"
)

// FaultEnv names the fault-injection point at which orch serve kills itself
// with SIGKILL, for the reliability tests: before-harvest-commit,
// after-harvest-commit, after-ledger-commit, before-ack, and for batched
// harvests batch-before-published-save. Unset in normal use.
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

// died handles a worker whose program ended: the worker is dead, its plan
// is queued again once, and fails the second time.
func (l *Loop) died(e event.Event) (*event.Callback, note) {
	w := l.st.Worker(e.Worker)
	if w == nil {
		return nil, l.refuse(e, "unknown worker "+e.Worker)
	}
	if e.Pane == "" {
		return nil, l.refuse(e, "a died event must name the pane that ended (ORCH_PANE)")
	}
	if e.Pane != w.Pane {
		return nil, ignoring(fmt.Sprintf("pane %s is not %s's pane %s", e.Pane, w.ID, w.Pane))
	}
	if w.State == state.WorkerDead {
		return nil, ignoring("already dead")
	}
	now := l.cfg.Now().UTC()
	reason := e.Status
	if reason == "" {
		reason = "process ended"
	}
	w.State, w.Reason, w.Since = state.WorkerDead, reason, now
	plan := w.Plan
	w.Plan = ""
	l.log.Warn("worker died", "worker", w.ID, "pane", e.Pane, "reason", reason, "plan", plan)
	p := l.st.Plans[plan]
	if p == nil || p.Worker != w.ID || !p.State.Working() {
		return event.NewCallback(event.CallbackDied, e.ID, w.ID, w.ID, reason, ""), noted("worker dead")
	}
	return l.requeueOrFail(e, w, p, reason)
}

// lostPlan handles a plan whose worker's pane was gone at start (the worker
// already has a new pane): by now every event sent before the loss has been
// handled, so if the plan is still held, its work is lost and it is queued
// again (once), and the worker, in its new pane, is free.
func (l *Loop) lostPane(e event.Event) (*event.Callback, note) {
	w := l.st.Worker(e.Worker)
	if w == nil {
		return nil, l.refuse(e, "unknown worker "+e.Worker)
	}
	p := l.st.Plans[e.Plan]
	if e.Attempt != 0 && p != nil && p.Attempts != e.Attempt {
		return nil, ignoring(fmt.Sprintf("about attempt %d of %s, which is at attempt %d", e.Attempt, e.Plan, p.Attempts))
	}
	if p != nil && p.State == state.PlanQueued && p.Preparing != 0 && p.Worker == w.ID {
		// Only its setup was running (in the worktree, which outlives the
		// pane): it runs again, and the new pane gets the line.
		return nil, ignoring(w.ID + " was only preparing " + e.Plan)
	}
	if e.Attempt == 0 && w.PID != 0 {
		// A record from before attempts were named, about a worker whose
		// process now runs (a later attempt): not about that one.
		return nil, ignoring(w.ID + " runs a process now")
	}
	if w.Plan == e.Plan && w.PID == 0 {
		w.Plan = ""
		if !w.Starting { // a new pane's agent not at its prompt yet stays busy
			w.State, w.Since = state.WorkerIdle, l.cfg.Now().UTC()
		}
	}
	if p == nil || p.Worker != w.ID || !p.State.Working() {
		return nil, ignoring("plan " + e.Plan + " no longer held by " + w.ID)
	}
	return l.requeueOrFail(e, w, p, e.Status)
}

// requeueOrFail queues a plan whose worker was lost again, once; the second
// loss fails it.
func (l *Loop) requeueOrFail(e event.Event, w *state.Worker, p *state.Run, reason string) (*event.Callback, note) {
	now := l.cfg.Now().UTC()
	if p.Attempts < 2 {
		// A plan pinned to the lost worker (--to) is free to go elsewhere.
		p.State, p.Worker, p.Target, p.Reason, p.Updated, p.AttemptSince = state.PlanQueued, "", "", fmt.Sprintf("%s died (%s); queued again", w.ID, reason), now, now
		return event.NewCallback(event.CallbackDied, e.ID, w.ID, w.ID, reason+"; plan "+p.Name+" queued again", ""), noted("worker lost, plan queued again")
	}
	p.State, p.Worker, p.Reason, p.Updated = state.PlanFailed, w.ID, fmt.Sprintf("%s died (%s) on attempt %d; not retried", w.ID, reason, p.Attempts), now
	return l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, p.Name, w.ID, p.Reason, "")), noted("worker lost, plan failed")
}

// ackCheck is the one timer armed per dispatch: if the plan is still only
// dispatched when it fires, the worker never said "started".
type ackCheck struct {
	plan    string
	attempt int
	resent  bool
}

func (l *Loop) armAck(p *state.Run, resent bool) {
	if l.cfg.AckTimeout <= 0 {
		return
	}
	c := ackCheck{plan: p.Name, attempt: p.Attempts, resent: resent}
	time.AfterFunc(l.cfg.AckTimeout, func() { send(l, l.timers, c) })
}

// ackExpired runs when a dispatch was not acknowledged in time: the pane is
// captured as evidence, the line is re-sent once, and the second time the
// plan fails with what the screen showed.
func (l *Loop) ackExpired(ctx context.Context, c ackCheck) {
	p := l.st.Plans[c.plan]
	if p == nil || p.State != state.PlanDispatched || p.Attempts != c.attempt {
		return // acknowledged, or moved on since
	}
	w := l.st.Worker(p.Worker)
	if w == nil || !l.fleet.Panes() {
		return
	}
	screen, err := l.fleet.Capture(ctx, w)
	if err != nil {
		screen = "(pane unreadable: " + err.Error() + ")"
	}
	if kind, what := l.fleet.Classify(screen, nil); kind == agent.ScreenDialog {
		// A dialog holds the line: the worker waits for a person, it is
		// not dead, and nothing more is typed into the dialog.
		if cb, _ := l.needsInput(event.New(event.NeedsInput, p.Name, what, w.ID, event.Hostname())); cb != nil {
			l.st.Outbox = append(l.st.Outbox, cb)
			l.flushOutbox()
		}
		return
	}
	shown := fleet.CountLine(screen, p.Name) > 0
	if !c.resent && !p.Resent {
		// The line on screen means it was typed but perhaps not submitted
		// (an Enter lost to a crash): press Enter only, never type it twice.
		l.log.Warn("no started within the deadline; re-sending the dispatch line once", "plan", p.Name, "worker", w.ID, "line_on_screen", shown)
		p.Resent = true
		if err := l.save(); err != nil {
			l.log.Error("save state", "err", err)
		}
		if err := l.retype(ctx, w, p.Name, shown); err != nil {
			l.log.Error("re-send", "plan", p.Name, "err", err)
		}
		l.armAck(p, true)
		return
	}
	evidence := fleet.LastLines(screen, 8)
	p.State, p.Reason, p.Updated = state.PlanFailed, fmt.Sprintf("no started from %s within %s of dispatch, line re-sent once (dispatch line on screen: %v); screen: %s",
		w.ID, l.cfg.AckTimeout, shown, evidence), l.cfg.Now().UTC()
	p.Unacked = true
	w.State, w.Plan, w.Reason = state.WorkerDead, "", "did not acknowledge dispatch of "+p.Name
	l.log.Warn("dispatch not acknowledged: plan failed", "plan", p.Name, "worker", w.ID)
	l.st.Outbox = append(l.st.Outbox, l.verificationFailed(p, event.NewCallback(event.CallbackFailed, fmt.Sprintf("ack-%s-%d", p.Name, p.Attempts), p.Name, w.ID, "no started after dispatch and one re-send", "")))
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	l.flushOutbox()
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

// retype re-sends a dispatch: Enter alone when the line is already on the
// worker's screen, the whole line otherwise.
func (l *Loop) retype(ctx context.Context, w *state.Worker, plan string, shown bool) error {
	if !shown {
		return l.typeLine(ctx, w, plan)
	}
	return l.fleet.PressEnter(ctx, w)
}

// typeLine types the dispatch line for plan into w's pane, after checking
// that the pane is still w's: a pane that cannot be proven to be the right
// worker is never typed into.
func (l *Loop) typeLine(ctx context.Context, w *state.Worker, plan string) error {
	line, err := fleet.DispatchLine(plan, l.fleet.NotifyBin())
	if err != nil {
		return err
	}
	// A line half typed (text without its Enter) is worse than a late one:
	// finish typing even if orch serve is asked to stop meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if w.Headless {
		return fmt.Errorf("%s is headless: its plan goes to a process (handOver), not a pane", w.ID)
	}
	if err := l.fleet.CheckPane(ctx, w); err != nil {
		return err
	}
	p := l.st.Plans[plan]
	if w.Starting && p != nil {
		// The agent is not at its prompt yet: the line goes in once it is
		// (resumeLine).
		p.Waiting = true
		return l.save()
	}
	if !l.fleet.WaitsForPrompt() || !l.fleet.ScreenWatch() || p == nil {
		return l.fleet.SendLine(ctx, w, line)
	}
	// An agent's input box may take the Enter of a fast send-keys as part
	// of the text, or drop it: type the text, and press Enter once the
	// line shows on the screen one more time than before (screenChanged),
	// or after echoTimeout.
	p.Typed, p.Echo = true, 0
	if screen, err := l.fleet.Capture(ctx, w); err == nil {
		p.Echo = fleet.CountLine(screen, plan)
	}
	if err := l.save(); err != nil {
		return err
	}
	if err := l.fleet.SendText(ctx, w, line); err != nil {
		return err
	}
	l.armEcho(w, p)
	return nil
}

// armEcho arms the one timer that presses Enter for p's typed line if it
// never shows on the screen.
func (l *Loop) armEcho(w *state.Worker, p *state.Run) {
	c := startCheck{worker: w.ID, echo: p.Name, attempt: p.Attempts}
	time.AfterFunc(echoTimeout, func() { send(l, l.starts, c) })
}
