package lead

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// handleMsg applies one message and acknowledges it once its effect is
// committed.
func (l *Loop) handleMsg(ctx context.Context, in inbound) {
	// Effects (git commits, typing into tmux) are finished even when orch
	// serve is asked to stop meanwhile: a git killed mid-commit would leave
	// index.lock behind and jam every later commit.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	m, e, err := in.m, in.e, in.err
	if err != nil {
		// It can never become valid: record it and drop it from the stream.
		l.log.Warn("rejected malformed event", "subject", m.Subject(), "err", err)
		l.st.Reject(state.Rejection{Kind: "malformed", Reason: err.Error(), Time: l.cfg.Now().UTC()})
		if err := l.save(); err != nil {
			l.log.Error("save state", "err", err)
			m.NakWithDelay(retryBackoff(m))
			return
		}
		m.Term()
		return
	}
	// The subject says who may have sent it (workers may publish only
	// <prefix>.ev.>): a kind must arrive on its own subject, so a worker
	// cannot pass a lead command off as an event.
	if want := l.wantSubject(m, e); m.Subject() != want {
		why := fmt.Sprintf("a %s event must arrive on %s, not %s", e.Kind, want, m.Subject())
		if w := event.SubjectWorker(l.prefix, m.Subject()); w != "" && w != e.Worker && !event.IsCommand(e.Kind) {
			// The worker is the one whose credential sent it, not the one
			// the payload names.
			why = fmt.Sprintf("sent with %s's credential, but it names worker %q", w, e.Worker)
		}
		l.refuseMsg(m, e, why)
		return
	}
	if why := l.hostRefusal(m, e); why != "" {
		l.refuseMsg(m, e, why)
		return
	}
	if e.Kind == event.Done && !l.handledAlready(in) {
		l.harvestDone(ctx, []inbound{in}) // the one harvest path
		return
	}
	cb, dup, err := l.apply(ctx, e)
	if err != nil {
		l.notYet(in, err)
		return
	}
	// The callback goes out first, then one save records the effect and
	// that the callback is out, then the ack. A crash between the callback
	// and the save means a redelivery: the effect is found done (trailers,
	// the ledger's event ids) and the same callback is sent again under the
	// same message id, which the broker drops as a copy.
	published := cb == nil
	if cb != nil {
		if err := l.publishCallback(cb); err != nil {
			l.log.Error("callback not published; the event will be redelivered", "plan", e.Plan, "err", err)
		} else if h := l.st.Handled[e.ID]; h != nil {
			h.Published, published = true, true
		}
	}
	_, hadErr := l.st.Errors[e.ID]
	delete(l.st.Errors, e.ID)
	// The dispatches the event makes possible share its save.
	next, changed := l.assign(ctx)
	if !dup || cb != nil || hadErr || l.unsaved || len(next) > 0 || changed {
		if err := l.save(); err != nil {
			// Kept in memory (the lead may have been told): the event comes
			// again and is acknowledged once a save succeeds.
			l.undo(next)
			l.log.Error("save state; the event will be redelivered", "kind", e.Kind, "plan", e.Plan, "event", e.ID, "err", err)
			m.NakWithDelay(retryBackoff(m))
			return
		}
	}
	if !published {
		m.NakWithDelay(retryBackoff(m))
	} else if err := l.ack(ctx, m); err != nil {
		// The effect is committed and recorded; a redelivery will be a no-op.
		l.log.Warn("ack", "event", e.ID, "err", err)
	}
	l.answer(e)
	l.runPending()
	l.handOver(ctx, next)
}

// refuseMsg records the refusal of the event m carries and drops m from
// the stream once that is saved (a failed save: m comes again).
func (l *Loop) refuseMsg(m jetstream.Msg, e event.Event, why string) {
	l.refuse(e, why)
	if err := l.save(); err != nil {
		m.NakWithDelay(retryBackoff(m))
		return
	}
	m.Term()
}

// answer tells whoever sent a command (orch dispatch, orch verify) what it
// came to, once that is recorded. Nobody may be listening (the sender gave
// up, or the command was spooled): the answer is not kept, the record is.
func (l *Loop) answer(e event.Event) {
	if e.Kind != event.Dispatch && e.Kind != event.Verify {
		return
	}
	h := l.st.Handled[e.ID]
	if h == nil {
		return
	}
	v := event.Verdict{Event: e.ID, Kind: e.Kind, Plan: e.Plan, Refused: h.Refused, Note: h.Note}
	if v.Note == "" {
		v.Note = "done"
	}
	data, err := json.Marshal(v)
	if err == nil {
		err = l.nc.Publish(event.VerdictSubject(l.prefix, e.ID), data)
	}
	if err != nil {
		l.log.Warn("verdict not sent", "kind", e.Kind, "plan", e.Plan, "event", e.ID, "err", err)
	}
}

// apply gives an event its effect exactly once, records it as handled (in
// memory: the caller saves) and returns the callback for the lead, if the
// event warrants one. dup says the event had its effect before. An error
// means nothing was recorded as handled: the event is to be redelivered.
func (l *Loop) apply(ctx context.Context, e event.Event) (cb *event.Callback, dup bool, err error) {
	if h, ok := l.st.Handled[e.ID]; ok {
		l.log.Info("duplicate event, no effect", "kind", e.Kind, "plan", e.Plan, "event", e.ID)
		if h.Published {
			return nil, true, nil
		}
		return h.Callback, true, nil
	}
	// A failed effect must leave no half-changed state behind: the
	// redelivery has to find the plan as it was.
	before, pending := l.st.Snapshot(), len(l.pending)
	if err := l.noteEvent(ctx, e); err != nil {
		return nil, false, err
	}
	var n state.Note
	switch e.Kind {
	case event.Dispatch:
		n = l.queue(e)
	case event.Started:
		n = l.started(e)
	case event.Blocked:
		cb, n = l.blocked(e)
	case event.Died:
		cb, n = l.died(e)
	case event.Lost:
		cb, n = l.lostPane(e)
	case event.Gated:
		cb, n, err = l.gated(ctx, e)
	case event.Verify:
		cb, n, err = l.verifyCmd(ctx, e)
	case event.Regate:
		n = l.regate(e)
	case event.Integrated:
		cb, n = l.integrated(ctx, e)
	case event.Exited:
		// The cost the run stated is kept first: its attempt's record
		// is the plan's until the exit lets the worker go.
		if err = l.headlessCost(ctx, e); err == nil {
			cb, n = l.exited(e)
		}
	case event.Prepared:
		cb, n = l.prepared(ctx, e)
	case event.TimedOut:
		cb, n = l.timedOut(e)
	case event.Measured:
		cb, n, err = l.measured(ctx, e)
	case event.NeedsInput:
		cb, n = l.sessions.NeedsInput(l.st, e)
	case event.Idle:
		cb, n = l.sessions.Idle(l.st, e)
	case event.Failed:
		cb, n = l.sessions.Failed(l.st, e)
		cb = l.outage(e, cb) // an outage moves the plan on (outage.go)
	case event.Ready:
		n = l.sessions.Ready(l.st, e)
	case event.Exhausted:
		cb, n = l.exhausted(e)
	case event.Send:
		n = l.nudge(e)
	}
	l.turnSignal(e)
	if err != nil {
		// Nothing of this event was recorded: nothing may start from it.
		// Work of earlier events, kept in memory, still waits for a save.
		l.pending = l.pending[:pending]
		l.st = before.Restore(l.st)
		return nil, false, err
	}
	if n.Kind == state.Ignored {
		l.log.Info(n.Text, "kind", e.Kind, "plan", e.Plan, "worker", e.Worker, "event", e.ID)
	}
	l.st.Handled[e.ID] = &state.Handled{Kind: string(e.Kind), Plan: e.Plan, Time: l.cfg.Now().UTC(), Callback: cb, Note: n.Text, Refused: n.Kind == state.Refused}
	return cb, false, nil
}

// refuse records an event that is well-formed but not acceptable now.
func (l *Loop) refuse(e event.Event, reason string) state.Note {
	l.log.Warn("refused", "kind", e.Kind, "plan", e.Plan, "worker", e.Worker, "event", e.ID, "reason", reason)
	return l.st.Refuse(e, reason, l.cfg.Now())
}

// queue handles orch dispatch: the plan waits for its dependencies and an
// idle worker.
func (l *Loop) queue(e event.Event) state.Note {
	def, err := plans.Load(l.cfg.Root, e.Plan)
	if err == nil {
		err = def.CheckAgents(agent.Names(l.conf))
	}
	if err != nil {
		return l.refuse(e, err.Error())
	}
	now := l.cfg.Now().UTC()
	p := l.st.Plans[e.Plan]
	if p == nil {
		p = &state.Run{Name: e.Plan}
		l.st.Plans[e.Plan] = p
	}
	switch p.State {
	case state.PlanQueued, state.PlanDispatched, state.PlanRunning, state.PlanNeedsInput, state.PlanVerifying:
		return l.refuse(e, fmt.Sprintf("plan %s is already %s", e.Plan, p.State))
	}
	if parent := l.st.Plans[p.VerifyOf]; p.VerifyOf != "" && (parent == nil || parent.State != state.PlanVerifying) {
		return l.refuse(e, fmt.Sprintf("plan %s verifies %s, which is no longer being verified (orch verify %s starts a new verification)", e.Plan, p.VerifyOf, p.VerifyOf))
	}
	// A verification plan keeps what makes it one (whom it verifies, whom
	// it must not go to); every plan keeps its attempt count and its
	// verification history.
	*p = state.Run{Name: e.Plan, State: state.PlanQueued, Target: e.Worker, Queued: e.Time, AttemptSince: e.Time, Updated: now, Attempts: p.Attempts,
		VerifyOf: p.VerifyOf, Round: p.Round, Exclude: p.Exclude, Avoid: p.Avoid, OtherThan: p.OtherThan, Verification: p.Verification, Base: p.Base, Stack: p.Stack, SetupRuns: p.SetupRuns,
		History: p.History}
	l.keepDef(e.Plan, def) // parsed once while PLAN.md stays as it is (planDef)
	l.log.Info("queued", "plan", e.Plan, "to", e.Worker)
	return state.Noted("queued")
}

// holder checks that the event's worker holds the plan (state.Holder).
func (l *Loop) holder(e event.Event) (*state.Run, *state.Worker, string) {
	return l.st.Holder(e.Plan, e.Worker, e.Time)
}

func (l *Loop) started(e event.Event) state.Note {
	p, w, why := l.holder(e)
	if why != "" {
		return l.refuse(e, why)
	}
	if l.revive(p, w) {
		return state.Noted("running (late start after the acknowledgement deadline)")
	}
	if p.State != state.PlanDispatched && p.State != state.PlanNeedsInput {
		return state.Ignoring("plan is " + string(p.State))
	}
	p.State, p.Reason = state.PlanRunning, ""
	p.Updated = l.cfg.Now().UTC()
	l.log.Info("running", "plan", e.Plan, "worker", e.Worker)
	return state.Noted("running")
}

func (l *Loop) blocked(e event.Event) (*event.Callback, state.Note) {
	p, w, why := l.holder(e)
	if why != "" {
		return nil, l.refuse(e, why)
	}
	l.revive(p, w)
	if !p.State.Working() {
		return nil, state.Ignoring("plan is " + string(p.State))
	}
	p.State, p.Reason, p.Updated = state.PlanBlocked, e.Status, l.cfg.Now().UTC()
	l.free(w)
	l.log.Info("blocked", "plan", e.Plan, "worker", e.Worker, "reason", e.Status)
	return event.NewCallback(event.CallbackBlocked, e.ID, e.Plan, e.Worker, e.Status, ""), state.Noted("blocked")
}

// gated handles the end of a plan's acceptance gates: the evidence is
// committed next to RESULT.md, and the plan is finished or failed.
func (l *Loop) gated(ctx context.Context, e event.Event) (*event.Callback, state.Note, error) {
	p := l.st.Plans[e.Plan]
	if p == nil || p.State != state.PlanVerifying || !p.Gates || e.Attempt != p.Attempts {
		return nil, state.Ignoring("no gates running for this attempt of " + e.Plan), nil
	}
	if err := l.harvester.Gates(ctx, e, plans.Dir+"/"+e.Plan+"/"+gates.GatesFile); err != nil {
		return nil, state.Note{}, fmt.Errorf("gates %s: %w", e.Plan, err)
	}
	p.Gates = false
	recordGates(p, e.Status)
	w := l.st.Worker(p.Worker)
	if e.Status != "passed" {
		p.State, p.Reason, p.Updated = state.PlanFailed, e.Status, l.cfg.Now().UTC()
		l.free(w)
		l.log.Warn("acceptance gate failed", "plan", e.Plan, "why", e.Status)
		return event.NewCallback(event.CallbackFailed, e.ID, e.Plan, p.Worker, e.Status, p.Result), state.Noted("failed: " + e.Status), nil
	}
	l.log.Info("acceptance gates passed", "plan", e.Plan)
	cb, err := l.finish(ctx, p, l.def(p), w)
	if err != nil {
		return nil, state.Note{}, err
	}
	if cb != nil {
		cb.Event = e.ID
	}
	return cb, state.Noted("gates passed"), nil
}

// finish records a harvested plan whose gates passed: the bet's
// after-measurement, the ledger entry, the plan done and its worker free
// (settle, as for a plan without gates).
func (l *Loop) finish(ctx context.Context, p *state.Run, def *state.Def, w *state.Worker) (*event.Callback, error) {
	h := &harvested{p: p, w: w, def: def}
	if err := l.settle(ctx, []*harvested{h}); err != nil {
		return nil, err
	}
	return h.cb, nil
}

// revive takes back a plan that failed only because its worker was slow to
// say "started" (state.Run.Revive).
func (l *Loop) revive(p *state.Run, w *state.Worker) bool {
	if !p.Revive(w, l.cfg.Now()) {
		return false
	}
	l.log.Info("late start: plan taken back", "plan", p.Name, "worker", w.ID)
	// Its deadline's timer may have fired while it was failed (and done
	// nothing): the attempt's time limit holds again.
	l.armDeadline(p)
	return true
}

func (l *Loop) free(w *state.Worker) { w.Free(l.cfg.Now()) }

// publishCallback stores the callback for orch wait (through l.publish:
// the broker, or a unit test's record).
func (l *Loop) publishCallback(cb *event.Callback) error {
	err := l.publish(cb)
	if err == nil && l.board != nil {
		l.board.Said(*cb, l.cfg.Now())
	}
	return err
}

// toBroker publishes a callback on the broker. Its message id is derived
// from the event id, so a redelivered event does not wake the lead twice.
func (l *Loop) toBroker(cb *event.Callback) error {
	msg := nats.NewMsg(broker.CallbackSubject(l.prefix, string(cb.Kind)))
	msg.Header.Set(nats.MsgIdHdr, "cb-"+cb.Event)
	data, err := json.Marshal(cb)
	if err != nil {
		return err
	}
	msg.Data = data
	return l.store(msg, 5*time.Second)
}

// reportRegates puts one regate record per plan whose gates were running
// when the last lead loop stopped into the stream, behind everything
// already there.
func (l *Loop) reportRegates() {
	for _, p := range l.st.Plans {
		if p.State != state.PlanVerifying || !p.Gates {
			continue
		}
		e := event.New(event.Regate, p.Name, "", "", event.Hostname())
		e.Attempt = p.Attempts
		l.publishRecord(e)
	}
}

// regate runs a plan's gates again if their result never came in.
func (l *Loop) regate(e event.Event) state.Note {
	p := l.st.Plans[e.Plan]
	if p == nil || p.State != state.PlanVerifying || !p.Gates || p.Attempts != e.Attempt || p.Def == nil {
		return state.Ignoring("the gates' result is in")
	}
	j := l.gateJob(context.Background(), p, p.Def.Acceptance)
	l.after(func() { l.gates.Start(j) })
	return state.Noted("gates run again")
}
